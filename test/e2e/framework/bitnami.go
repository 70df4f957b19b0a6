package framework

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/internal/resources"
)

// BitnamiEtcd is an etcd StatefulSet laid out as the Bitnami chart (bitnami/etcd) runs it with
// its defaults, without TLS unless TLS is set: the release's StatefulSet <Name> with Parallel pod management and a
// PVC per member, a headless Service <Name>-headless (not-ready addresses published: members
// resolve each other before any is Ready) and a client Service <Name>; each member named after
// its Pod, peer and client URLs on the Pod's FQDN under the headless Service
// (http://<pod>.<Name>-headless.<ns>.svc.cluster.local:2380 and :2379), the client Service's URL
// advertised as well, initial cluster state new, configured through ETCD_* environment
// variables. Unlike the chart it runs the upstream etcd image of the suite (so the versions
// match Steward's), with the suite's restricted security context, and has no preStop hook (the
// chart's removes a member from etcd when its container stops; its script is in the Bitnami
// image only). Auth stays off (the chart's allowNoneAuthentication). It is the source
// Steward's adoption (spec.bootstrap.join) takes over in the e2e tests.
type BitnamiEtcd struct {
	Namespace string
	Name      string // the release name: StatefulSet and client Service
	Replicas  int
	Image     string
	// AutoCompactionMode and AutoCompactionRetention are the chart's autoCompactionMode and
	// autoCompactionRetention (unset by default: etcd's defaults).
	AutoCompactionMode      string
	AutoCompactionRetention string
	// PreStop gives the etcd container the chart's preStop hook (removeMemberOnContainerTermination,
	// on by default in the chart), which removes the member from etcd when its container stops.
	// Its script exists only in the Bitnami image: here the hook is declared (what an adoption's
	// preflight looks for) and fails if it ever runs.
	PreStop bool
	// TLS, when set, runs both planes over TLS with client-certificate authentication, as the
	// chart does with auth.client and auth.peer secureTransport and enableAuthentication: every
	// URL is https. Unset: plaintext, the chart's default.
	TLS *BitnamiTLS
}

// BitnamiTLS is the TLS material of a source: its CA, the certificate its members present and an
// application's client certificate. One member certificate serves every member on both planes
// (the chart takes one existingSecret per plane, and a wildcard certificate is what its users
// usually give it), so a member that dials a peer presents it as a client certificate too.
type BitnamiTLS struct {
	CA *pki.CA
	// Member names every member's host, the client Service and localhost (see BitnamiMemberDNSNames),
	// for server and client authentication.
	Member *pki.Leaf
	// Client is what an application of the source holds: a client certificate of CA, naming no
	// host (etcd checks a client certificate's names only on the peer port).
	Client *pki.Leaf
	// PeersPlaintext keeps the peer plane plaintext (http:// peer URLs, no peer certificates),
	// as the chart runs with auth.client.secureTransport and without auth.peer.secureTransport.
	PeersPlaintext bool
	// PeerAllowedCN, when set, is the one certificate name the members admit on their peer port
	// (etcd's --peer-cert-allowed-cn), as a hardened source runs.
	PeerAllowedCN string
}

// Where the chart mounts its client and peer certificate Secrets, and the file names it reads
// (auth.*.certFilename and certKeyFilename defaults; ca.crt for the CA).
const (
	bitnamiClientCertDir = "/opt/bitnami/etcd/certs/client"
	bitnamiPeerCertDir   = "/opt/bitnami/etcd/certs/peer"
	bitnamiCertFile      = "cert.pem"
	bitnamiKeyFile       = "key.pem"
	bitnamiCAFile        = "ca.crt"
	// bitnamiMetricsPort serves /health over plain HTTP: with client-certificate auth the client
	// port's /health refuses a kubelet probe, which presents no certificate.
	bitnamiMetricsPort = 2381
)

// NewBitnamiTLS creates a CA for the source b (Namespace, Name and Replicas set) and issues its
// member and client certificates, valid from now on.
func NewBitnamiTLS(b BitnamiEtcd, now time.Time) (*BitnamiTLS, error) {
	ca, err := pki.NewCA(b.Name+"-source", b.Namespace, now, 0)
	if err != nil {
		return nil, err
	}
	member, err := ca.Issue(b.Name, pki.Server, BitnamiMemberDNSNames(b), now, 0)
	if err != nil {
		return nil, err
	}
	client, err := ca.IssueClient(b.Name+"-app", now, 0)
	if err != nil {
		return nil, err
	}
	return &BitnamiTLS{CA: ca, Member: member, Client: client}, nil
}

// BitnamiMemberDNSNames are the names of the member certificate: the wildcard under the headless
// Service (what clients and peers dialling a member's URL verify), each member's name under it
// spelled out as well, the client Service's names and localhost. etcd checks that a connecting
// peer's certificate names its address: a wildcard passes only by a reverse lookup of the Pod IP,
// an explicit name by a forward lookup, which the headless Service answers for every member,
// ready or not.
func BitnamiMemberDNSNames(b BitnamiEtcd) []string {
	dns := []string{"*." + b.HeadlessName() + "." + b.Namespace + ".svc." + ClusterDomain()}
	for _, p := range b.PodNames() {
		dns = append(dns, b.podHost(p))
	}
	svc := b.Name + "." + b.Namespace
	return append(dns, svc+".svc."+ClusterDomain(), svc+".svc", svc, b.Name, "localhost")
}

// ClientConfig is the TLS configuration of an application of the source: it presents Client and
// trusts CA alone. The server name is left to the client (clientv3 verifies each endpoint against
// the host of its URL), so every certificate dialled must name that host.
func (t *BitnamiTLS) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    pki.Pool([]*x509.Certificate{t.CA.Cert}),
		Certificates: []tls.Certificate{{
			Certificate: [][]byte{t.Client.Cert.Raw}, PrivateKey: t.Client.Key, Leaf: t.Client.Cert,
		}},
	}
}

// CASecret is the source's CA as `kubectl create secret tls` writes it (tls.crt the CA
// certificate, tls.key its key): what spec.bootstrap.join.caSecretName names.
func (t *BitnamiTLS) CASecret(ns, name string) (*corev1.Secret, error) {
	key, err := t.CA.KeyPEM()
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: t.CA.CertPEM(), corev1.TLSPrivateKeyKey: key},
	}, nil
}

// TLSSecretName is the Secret with the members' certificate, given to the chart as both planes'
// existingSecret.
func (b BitnamiEtcd) TLSSecretName() string { return b.Name + "-certs" }

// TLSSecret holds the member certificate, its key and the CA under the chart's file names.
func (b BitnamiEtcd) TLSSecret() (*corev1.Secret, error) {
	if b.TLS == nil {
		return nil, fmt.Errorf("source %s/%s is plaintext: it has no TLS Secret", b.Namespace, b.Name)
	}
	key, err := pki.EncodeKeyPEM(b.TLS.Member.Key)
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: b.TLSSecretName(), Labels: b.Labels()},
		Data: map[string][]byte{
			bitnamiCertFile: pki.EncodeCertPEM(b.TLS.Member.Cert), bitnamiKeyFile: key, bitnamiCAFile: b.TLS.CA.CertPEM(),
		},
	}, nil
}

// ClusterDomain is the cluster's DNS domain ($STEWARD_E2E_CLUSTER_DOMAIN, default cluster.local).
func ClusterDomain() string { return envOr("STEWARD_E2E_CLUSTER_DOMAIN", "cluster.local") }

// Labels select the release's Pods, as the chart's do.
func (b BitnamiEtcd) Labels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": "etcd", "app.kubernetes.io/instance": b.Name}
}

// HeadlessName is the headless Service that gives members their DNS names.
func (b BitnamiEtcd) HeadlessName() string { return b.Name + "-headless" }

// PodNames are the member Pods, which are also the etcd member names.
func (b BitnamiEtcd) PodNames() []string {
	out := make([]string, b.Replicas)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", b.Name, i)
	}
	return out
}

func (b BitnamiEtcd) podHost(pod string) string {
	return fmt.Sprintf("%s.%s.%s.svc.%s", pod, b.HeadlessName(), b.Namespace, ClusterDomain())
}

// scheme is the client plane's URL scheme.
func (b BitnamiEtcd) scheme() string {
	if b.TLS != nil {
		return "https"
	}
	return "http"
}

// peerScheme is the peer plane's URL scheme.
func (b BitnamiEtcd) peerScheme() string {
	if b.TLS != nil && !b.TLS.PeersPlaintext {
		return "https"
	}
	return "http"
}

// PeerURL is a member's peer URL.
func (b BitnamiEtcd) PeerURL(pod string) string {
	return b.peerScheme() + "://" + b.podHost(pod) + ":2380"
}

// MemberClientURL is a member's own client URL, the first it advertises.
func (b BitnamiEtcd) MemberClientURL(pod string) string {
	return b.scheme() + "://" + b.podHost(pod) + ":2379"
}

// ClientURL is the client Service's URL, what applications of the chart are given.
func (b BitnamiEtcd) ClientURL() string {
	return fmt.Sprintf("%s://%s.%s.svc.%s:2379", b.scheme(), b.Name, b.Namespace, ClusterDomain())
}

// HeadlessService publishes every member's address, ready or not.
func (b BitnamiEtcd) HeadlessService() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: b.HeadlessName(), Labels: b.Labels()},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true, Selector: b.Labels(),
			Ports: []corev1.ServicePort{
				{Name: "client", Port: 2379, TargetPort: intstr.FromString("client")},
				{Name: "peer", Port: 2380, TargetPort: intstr.FromString("peer")},
			},
		},
	}
}

// ClientService routes to the ready members.
func (b BitnamiEtcd) ClientService() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: b.Name, Labels: b.Labels()},
		Spec: corev1.ServiceSpec{Selector: b.Labels(),
			Ports: []corev1.ServicePort{
				{Name: "client", Port: 2379, TargetPort: intstr.FromString("client")},
				{Name: "peer", Port: 2380, TargetPort: intstr.FromString("peer")},
			}},
	}
}

// StatefulSet runs the members.
func (b BitnamiEtcd) StatefulSet() *appsv1.StatefulSet {
	var initial []string
	for _, p := range b.PodNames() {
		initial = append(initial, p+"="+b.PeerURL(p))
	}
	podHost := fmt.Sprintf("$(MY_POD_NAME).%s.%s.svc.%s", b.HeadlessName(), b.Namespace, ClusterDomain())
	env := []corev1.EnvVar{
		{Name: "MY_POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "MY_POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "ETCDCTL_API", Value: "3"},
		{Name: "ETCD_NAME", Value: "$(MY_POD_NAME)"},
		{Name: "ETCD_DATA_DIR", Value: "/bitnami/etcd/data"},
		{Name: "ETCD_LOG_LEVEL", Value: "info"},
		{Name: "ETCD_ADVERTISE_CLIENT_URLS", Value: b.scheme() + "://" + podHost + ":2379," + b.ClientURL()},
		{Name: "ETCD_LISTEN_CLIENT_URLS", Value: b.scheme() + "://0.0.0.0:2379"},
		{Name: "ETCD_INITIAL_ADVERTISE_PEER_URLS", Value: b.peerScheme() + "://" + podHost + ":2380"},
		{Name: "ETCD_LISTEN_PEER_URLS", Value: b.peerScheme() + "://0.0.0.0:2380"},
		{Name: "ETCD_INITIAL_CLUSTER_TOKEN", Value: "etcd-cluster-k8s"},
		{Name: "ETCD_INITIAL_CLUSTER_STATE", Value: "new"},
		{Name: "ETCD_INITIAL_CLUSTER", Value: strings.Join(initial, ",")},
	}
	if b.AutoCompactionMode != "" {
		env = append(env, corev1.EnvVar{Name: "ETCD_AUTO_COMPACTION_MODE", Value: b.AutoCompactionMode})
	}
	if b.AutoCompactionRetention != "" {
		env = append(env, corev1.EnvVar{Name: "ETCD_AUTO_COMPACTION_RETENTION", Value: b.AutoCompactionRetention})
	}
	ports := []corev1.ContainerPort{{Name: "client", ContainerPort: 2379}, {Name: "peer", ContainerPort: 2380}}
	probePort := "client"
	var volumes []corev1.Volume
	mounts := []corev1.VolumeMount{{Name: "data", MountPath: "/bitnami/etcd"}}
	if b.TLS != nil {
		env = append(env, b.tlsEnv()...)
		// The chart's own probe runs etcdctl with a client certificate; an HTTP probe has none,
		// so it asks the metrics listener, which serves /health without TLS.
		env = append(env, corev1.EnvVar{Name: "ETCD_LISTEN_METRICS_URLS", Value: fmt.Sprintf("http://0.0.0.0:%d", bitnamiMetricsPort)})
		ports = append(ports, corev1.ContainerPort{Name: "metrics", ContainerPort: bitnamiMetricsPort})
		probePort = "metrics"
		volumes = []corev1.Volume{{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: b.TLSSecretName(), DefaultMode: ptr.To[int32](0o440)}}}}
		mounts = append(mounts,
			corev1.VolumeMount{Name: "certs", MountPath: bitnamiClientCertDir, ReadOnly: true},
			corev1.VolumeMount{Name: "certs", MountPath: bitnamiPeerCertDir, ReadOnly: true})
	}
	// /health answers 503 without a leader or with an alarm: Ready means "serves". The chart
	// probes with a script (etcdctl endpoint health) after 60 s; these start at once, so the
	// client Service has endpoints as soon as the cluster serves.
	probe := func(period, failures int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString(probePort)}},
			PeriodSeconds: period, TimeoutSeconds: 2, FailureThreshold: failures}
	}
	var lifecycle *corev1.Lifecycle
	if b.PreStop {
		lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
			Exec: &corev1.ExecAction{Command: []string{"/opt/bitnami/scripts/etcd/prestop.sh"}}}}
	}
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: b.Name, Labels: b.Labels()},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(int32(b.Replicas)),
			ServiceName:         b.HeadlessName(),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			Selector:            &metav1.LabelSelector{MatchLabels: b.Labels()},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: b.Labels()},
				Spec: corev1.PodSpec{
					SecurityContext: resources.RestrictedPod(),
					Volumes:         volumes,
					Containers: []corev1.Container{{
						Name: "etcd", Image: b.Image, ImagePullPolicy: corev1.PullIfNotPresent,
						SecurityContext: resources.RestrictedContainer(),
						Command:         []string{"etcd"},
						Env:             env,
						Ports:           ports,
						ReadinessProbe:  probe(2, 3),
						LivenessProbe:   probe(10, 5),
						Lifecycle:       lifecycle,
						VolumeMounts:    mounts,
					}},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
			}},
		},
	}
}

// tlsEnv is the chart's TLS configuration: the member certificate served and presented, the CA
// trusted, client certificates required from clients and (unless PeersPlaintext) peers alike.
func (b BitnamiEtcd) tlsEnv() []corev1.EnvVar {
	file := func(dir, name string) string { return dir + "/" + name }
	env := []corev1.EnvVar{
		{Name: "ETCD_CERT_FILE", Value: file(bitnamiClientCertDir, bitnamiCertFile)},
		{Name: "ETCD_KEY_FILE", Value: file(bitnamiClientCertDir, bitnamiKeyFile)},
		{Name: "ETCD_TRUSTED_CA_FILE", Value: file(bitnamiClientCertDir, bitnamiCAFile)},
		{Name: "ETCD_CLIENT_CERT_AUTH", Value: "true"},
	}
	if b.TLS.PeersPlaintext {
		return env
	}
	env = append(env,
		corev1.EnvVar{Name: "ETCD_PEER_CERT_FILE", Value: file(bitnamiPeerCertDir, bitnamiCertFile)},
		corev1.EnvVar{Name: "ETCD_PEER_KEY_FILE", Value: file(bitnamiPeerCertDir, bitnamiKeyFile)},
		corev1.EnvVar{Name: "ETCD_PEER_TRUSTED_CA_FILE", Value: file(bitnamiPeerCertDir, bitnamiCAFile)},
		corev1.EnvVar{Name: "ETCD_PEER_CLIENT_CERT_AUTH", Value: "true"})
	if b.TLS.PeerAllowedCN != "" {
		env = append(env, corev1.EnvVar{Name: "ETCD_PEER_CERT_ALLOWED_CN", Value: b.TLS.PeerAllowedCN})
	}
	return env
}

// ClusterDNS is the cluster DNS server the tests resolve Service and Pod names with
// ($STEWARD_E2E_CLUSTER_DNS; hack/e2e.sh sets it).
func ClusterDNS() string { return os.Getenv("STEWARD_E2E_CLUSTER_DNS") }
