// Package resources builds the Kubernetes objects of an etcd cluster (member Pods, PVCs, Services,
// the PodDisruptionBudget) from a member template. Pure functions: no client, no clock.
package resources

import (
	"fmt"
	"strconv"
	"strings"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// Kubernetes' recommended labels Steward puts on everything it creates, next to its own
// (stewardv1.LabelCluster and the others of api/v1alpha1/wellknown.go). Selectors use only these
// and Steward's own, never user labels.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// VoterDraining is stewardv1.LabelVoter's value on a voter about to be stopped: out of the
	// client Service (and of the PodDisruptionBudget's count, which then allows no eviction while
	// it goes).
	VoterDraining = "draining"
)

// Ports etcd listens on inside each member Pod.
const (
	ClientPort  = 2379
	PeerPort    = 2380
	MetricsPort = 2381
)

// DataMountPath is where the member's volume is mounted; etcd's data dir is a child of it so a
// fresh volume's lost+found never confuses etcd.
const DataMountPath = "/var/lib/etcd"

// MemberName is the name of member ordinal n: its EtcdMember, Pod and hostname.
func MemberName(cluster string, ordinal int32) string {
	return cluster + "-" + strconv.Itoa(int(ordinal))
}

// OrdinalOf parses the ordinal back out of a member name of cluster.
func OrdinalOf(cluster, member string) (int32, bool) {
	rest, ok := strings.CutPrefix(member, cluster+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 32)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != rest {
		return 0, false
	}
	return int32(n), true
}

// PVCName is the data volume claim of a PVC-backed member.
func PVCName(member string) string { return "data-" + member }

// PeerServiceName is the headless Service that gives members stable DNS names.
func PeerServiceName(cluster string) string { return cluster }

// ClientServiceName is the Service applications use; it selects ready voters only.
func ClientServiceName(cluster string) string { return cluster + "-client" }

// PDBName is the PodDisruptionBudget over member Pods.
func PDBName(cluster string) string { return cluster }

// MemberHost is a member's stable DNS name through the headless Service.
func MemberHost(cluster, namespace, member string) string {
	return fmt.Sprintf("%s.%s.%s.svc", member, PeerServiceName(cluster), namespace)
}

// Scheme is the URL scheme of the cluster's client plane: https with TLS (the default), else http.
func Scheme(ec *stewardv1.EtcdCluster) string {
	if ec.TLSEnabled() {
		return "https"
	}
	return "http"
}

// PeerScheme is the URL scheme of the members' peer plane: the client plane's, but http with
// spec.tls.peer.enabled false.
func PeerScheme(ec *stewardv1.EtcdCluster) string {
	if ec.PeerTLSEnabled() {
		return "https"
	}
	return "http"
}

// PeerURL is the member's peer URL as etcd records it; the member list is matched on it.
func PeerURL(ec *stewardv1.EtcdCluster, member string) string {
	return fmt.Sprintf("%s://%s:%d", PeerScheme(ec), MemberHost(ec.Name, ec.Namespace, member), PeerPort)
}

// ClientURL is the member's advertised client URL.
func ClientURL(ec *stewardv1.EtcdCluster, member string) string {
	return fmt.Sprintf("%s://%s:%d", Scheme(ec), MemberHost(ec.Name, ec.Namespace, member), ClientPort)
}

// CASecretName holds the cluster CA Steward runs (and the next one during a rotation).
func CASecretName(cluster string) string { return cluster + "-ca" }

// MemberTLSSecretName holds a member's server and peer certificates and trust bundles.
func MemberTLSSecretName(member string) string { return member + "-tls" }

// ClientTLSSecretName is the Secret applications mount: a client certificate and the trust bundle.
func ClientTLSSecretName(cluster string) string { return cluster + "-client-tls" }

// BackupTLSSecretName is the client certificate backup Jobs, drills and the streamer present when
// etcd auth is declared (CN steward-backup, a root user: etcd lets only root take snapshots).
func BackupTLSSecretName(cluster string) string { return cluster + "-backup-tls" }

// ClusterToken is --initial-cluster-token: derived from the EtcdCluster's UID, so a cluster
// deleted and recreated under the same name never joins members that kept the old data.
func ClusterToken(ec *stewardv1.EtcdCluster) string {
	return ec.Name + "-" + string(ec.UID)
}

// SelectorLabels select every member Pod of a cluster.
func SelectorLabels(cluster string) map[string]string {
	return map[string]string{LabelName: "etcd", LabelInstance: cluster, stewardv1.LabelCluster: cluster}
}

// Image is the container image of a template: the override, or <repository>:v<version>.
func Image(t *stewardv1.MemberTemplate, repository string) string {
	if t.Image != "" {
		return t.Image
	}
	return repository + ":v" + t.Version
}
