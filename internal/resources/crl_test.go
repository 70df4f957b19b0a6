package resources

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// Members check client certificates against the revocation list only with spec.auth, and only
// where Steward can sign one (its own CA): a Pod that mounted a list nobody writes would never
// start, and etcd without the file refuses every client.
func TestServesCRL(t *testing.T) {
	auth := &stewardv1.AuthSpec{Enabled: true}
	for _, tc := range []struct {
		name string
		ec   *stewardv1.EtcdCluster
		want bool
	}{
		{"no spec.auth", cluster(nil), false},
		{"auth, default TLS", cluster(func(c *stewardv1.EtcdCluster) { c.Spec.Auth = auth }), true},
		{"auth declared but off", cluster(func(c *stewardv1.EtcdCluster) { c.Spec.Auth = &stewardv1.AuthSpec{} }), true},
		{"auth, Operator source", cluster(func(c *stewardv1.EtcdCluster) {
			c.Spec.Auth, c.Spec.TLS = auth, &stewardv1.TLSSpec{Peer: stewardv1.TLSPlane{Source: stewardv1.TLSSourceOperator}}
		}), true},
		{"auth, TLS off", cluster(func(c *stewardv1.EtcdCluster) {
			c.Spec.Auth, c.Spec.TLS = auth, &stewardv1.TLSSpec{Enabled: ptr.To(false)}
		}), false},
		{"auth, the user's Secrets", cluster(func(c *stewardv1.EtcdCluster) {
			c.Spec.Auth, c.Spec.TLS = auth, &stewardv1.TLSSpec{Peer: stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret, SecretName: "p"}}
		}), false},
		{"auth, cert-manager", cluster(func(c *stewardv1.EtcdCluster) {
			c.Spec.Auth, c.Spec.TLS = auth, &stewardv1.TLSSpec{Peer: stewardv1.TLSPlane{Source: stewardv1.TLSSourceCertManager}}
		}), false},
	} {
		if got := ServesCRL(tc.ec); got != tc.want {
			t.Errorf("%s: ServesCRL = %v, want %v", tc.name, got, tc.want)
		}
		p := Pod(member(tc.ec), "repo")
		flag := slices.ContainsFunc(p.Spec.Containers[0].Args, func(a string) bool { return a == "--client-crl-file=/etc/etcd/crl/crl.der" })
		vol := slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool {
			return v.Name == "crl" && v.Secret != nil && v.Secret.SecretName == "db-crl" && (v.Secret.Optional == nil || !*v.Secret.Optional) &&
				len(v.Secret.Items) == 1 && v.Secret.Items[0].Key == KeyCRL
		})
		mount := slices.ContainsFunc(p.Spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == "crl" && m.MountPath == CRLMountPath && m.ReadOnly
		})
		if flag != tc.want || vol != tc.want || mount != tc.want || PodServesCRL(p) != tc.want {
			t.Errorf("%s: flag %v, required volume %v, mount %v, PodServesCRL %v; want all %v", tc.name, flag, vol, mount, PodServesCRL(p), tc.want)
		}
	}
}

// The flag comes before the user's extraArgs (which may not name it) and with TLS's own flags.
func TestCRLFlagOrder(t *testing.T) {
	args := Args(member(cluster(func(c *stewardv1.EtcdCluster) {
		c.Spec.Auth = &stewardv1.AuthSpec{}
		c.Spec.Options.ExtraArgs = map[string]string{"log-outputs": "stderr"}
	})))
	crl := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "--client-crl-file=") })
	trusted := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "--trusted-ca-file=") })
	extra := slices.Index(args, "--log-outputs=stderr")
	if crl < 0 || trusted < 0 || extra < 0 || crl < trusted || crl > extra {
		t.Errorf("args %v: want --client-crl-file after --trusted-ca-file and before the extraArgs", args)
	}
	if PodServesCRL(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "check", Args: []string{"--client-crl-file=x"}}}}}) {
		t.Error("PodServesCRL read a container other than etcd")
	}
}
