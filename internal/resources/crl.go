package resources

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// The certificate revocation list members check client certificates against (etcd's
// --client-crl-file): one Secret per cluster, its DER list under KeyCRL, mounted read-only.
const (
	CRLMountPath = "/etc/etcd/crl"
	crlFlag      = "client-crl-file"
)

// KeyCRL is the list's key in the Secret and its file name. It holds DER, not PEM: etcd (checkCRL in
// go.etcd.io/etcd/client/pkg/v3/transport/listener_tls.go, the same in 3.6.16 and 3.7.3) reads
// the file with os.ReadFile and hands the bytes straight to x509.ParseRevocationList, which takes
// DER only; a PEM file fails to parse, and etcd then refuses every client, the operator included.
//
// What else etcd does with the list, read in that source: it reads the file again for every new
// client connection (so a swapped Secret takes effect without a restart, and a missing file
// refuses everyone); it looks the serials of every certificate the client sent up in it, and
// nothing else: not the list's signature, issuer or NextUpdate. A connection already open when
// a certificate is revoked is not checked again.
const KeyCRL = "crl.der"

// CRLSecretName holds the cluster's revocation list.
func CRLSecretName(cluster string) string { return cluster + "-crl" }

// ServesCRL says whether the cluster's members run with a revocation list: when spec.auth is set
// (removing a user revokes its certificates, docs/auth.md) on a TLS cluster whose certificates
// Steward issues from a CA it holds, so it can sign the list and always has one to mount. etcd
// refuses every client, the operator too, when the file is missing; the Pod mounts the Secret
// without optional, so the kubelet starts etcd only once the list is there.
func ServesCRL(ec *stewardv1.EtcdCluster) bool {
	if ec.Spec.Auth == nil || !ec.TLSEnabled() {
		return false
	}
	return ec.Spec.TLS == nil || ec.Spec.TLS.Peer.Source == "" || ec.Spec.TLS.Peer.Source == stewardv1.TLSSourceOperator
}

// crlArgs is the flag of a member that serves the list.
func crlArgs(ec *stewardv1.EtcdCluster) []string {
	if !ServesCRL(ec) {
		return nil
	}
	return []string{"--" + crlFlag + "=" + CRLMountPath + "/" + KeyCRL}
}

// withCRL mounts the list into a member Pod that serves it.
func withCRL(pod *corev1.Pod, ec *stewardv1.EtcdCluster) {
	if !ServesCRL(ec) {
		return
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "crl", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: CRLSecretName(ec.Name), DefaultMode: ptr.To[int32](0o400),
			Items: []corev1.KeyToPath{{Key: KeyCRL, Path: KeyCRL}}},
	}})
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "crl", MountPath: CRLMountPath, ReadOnly: true})
}

// PodServesCRL says whether a member Pod's etcd runs with a revocation list.
func PodServesCRL(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		if c.Name == "etcd" && slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--"+crlFlag+"=") }) {
			return true
		}
	}
	return false
}
