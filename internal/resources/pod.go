package resources

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// ClusterState is etcd's --initial-cluster-state.
type ClusterState string

const (
	// StateNew starts a new cluster; only the seed of a cluster that never formed uses it.
	StateNew ClusterState = "new"
	// StateExisting joins a member that was added to a running cluster.
	StateExisting ClusterState = "existing"
)

// Bootstrap is how a member joins, decided by the controller from the live member list when the
// Pod is created. etcd ignores it once the data directory holds a member, so a recreated Pod of a
// PVC member restarts with its own identity whatever these say.
type Bootstrap struct {
	// InitialCluster is --initial-cluster: name=peerURL pairs of the voters and this member.
	InitialCluster string
	State          ClusterState
	// ForceNewCluster starts etcd with --force-new-cluster: a quorum recovery's survivor, once.
	ForceNewCluster bool
	// MemberID (hex) the data directory must belong to, once etcd assigned one; ExpectData: the
	// member ran before this Pod, so an empty directory is a loss (see internal/datacheck).
	MemberID   string
	ExpectData bool
}

// Member identifies the member a Pod is for.
type Member struct {
	Cluster   *stewardv1.EtcdCluster
	Name      string
	Template  *stewardv1.MemberTemplate
	Bootstrap Bootstrap
	// Voter sets stewardv1.LabelVoter so the client Service routes to the member.
	Voter bool
	// Trust is the value of the trusted-CAs annotation: the trust bundle in the member's TLS
	// Secret when the Pod is created, which is what its etcd will load.
	Trust string
	// ToolsImage is the Steward image: etcd then starts through `steward member run-etcd`, which
	// refuses a data directory that is empty or another member's (internal/datacheck). "" starts
	// etcd directly.
	ToolsImage string
	// ToolsFromImage mounts ToolsImage as an image volume and runs the member binary from it, where
	// the cluster can (see resources.ImageVolumes): no init container copies it first. Either way
	// the Pod runs the same wrapper, so the choice is not rendering that rolls members (PodRevision).
	ToolsFromImage bool
}

// TLS files in the member's Secret, mounted at TLSMountPath.
const (
	TLSMountPath  = "/etc/etcd/tls"
	KeyServerCert = "server.crt"
	KeyServerKey  = "server.key"
	KeyPeerCert   = "peer.crt"
	KeyPeerKey    = "peer.key"
	// KeyPeerCA and KeyClientCA are the planes' trust bundles, kept apart so a client certificate
	// can never pass as a peer.
	KeyPeerCA   = "peer-ca.crt"
	KeyClientCA = "client-ca.crt"
)

// Pod builds the member's Pod. imageRepository is used when the template sets no image.
func Pod(m Member, imageRepository string) *corev1.Pod {
	ec, t := m.Cluster, m.Template
	labels := MemberLabels(ec.Name, m.Name, t, m.Voter)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        m.Name,
			Namespace:   ec.Namespace,
			Labels:      labels,
			Annotations: maps.Clone(t.PodMetadata.Annotations),
		},
		Spec: corev1.PodSpec{
			Hostname:  m.Name,
			Subdomain: PeerServiceName(ec.Name),
			// etcd reads ETCD_* variables as flags; Service links would inject some.
			EnableServiceLinks:            ptr.To(false),
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			ImagePullSecrets:              slices.Clone(t.ImagePullSecrets),
			NodeSelector:                  maps.Clone(t.NodeSelector),
			Tolerations:                   slices.Clone(t.Tolerations),
			TopologySpreadConstraints:     topologySpread(ec.Name, t),
			PriorityClassName:             t.PriorityClassName,
			Affinity:                      affinity(t),
			SecurityContext:               RestrictedPod(),
			Containers: []corev1.Container{{
				Name:      "etcd",
				Image:     Image(t, imageRepository),
				Command:   []string{"/usr/local/bin/etcd"},
				Args:      Args(m),
				Resources: *t.Resources.DeepCopy(),
				Ports: []corev1.ContainerPort{
					{Name: "client", ContainerPort: ClientPort},
					{Name: "peer", ContainerPort: PeerPort},
					{Name: "metrics", ContainerPort: MetricsPort},
				},
				VolumeMounts:    []corev1.VolumeMount{{Name: "data", MountPath: DataMountPath}},
				ReadinessProbe:  probe(readinessPath(t.Version), 1, 3),
				LivenessProbe:   probe(livenessPath(t.Version), 5, 8),
				StartupProbe:    probe(livenessPath(t.Version), 1, 300),
				SecurityContext: RestrictedContainer(),
			}},
			Volumes: []corev1.Volume{dataVolume(m.Name, t)},
		},
	}
	if m.ToolsImage != "" {
		withDataCheck(pod, m)
	}
	pod.Annotations = withKey(pod.Annotations, stewardv1.AnnotationTemplate, templateAnnotation(t))
	pod.Annotations[stewardv1.AnnotationPodRevision] = strconv.Itoa(PodRevision)
	if m.Bootstrap.ForceNewCluster {
		pod.Annotations = withKey(pod.Annotations, stewardv1.AnnotationForceNewCluster, "true")
	}
	if ec.TLSEnabled() {
		pod.Annotations = withKey(pod.Annotations, stewardv1.AnnotationTrust, m.Trust)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: MemberTLSSecretName(m.Name), DefaultMode: ptr.To[int32](0o400)},
		}})
		c := &pod.Spec.Containers[0]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "tls", MountPath: TLSMountPath, ReadOnly: true})
	}
	withCRL(pod, ec)
	return pod
}

func withKey(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

// MemberLabels are a member Pod's labels: the user's podMetadata labels, then Steward's own, which
// win so selectors cannot be broken from the spec.
func MemberLabels(cluster, member string, t *stewardv1.MemberTemplate, voter bool) map[string]string {
	labels := maps.Clone(t.PodMetadata.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, SelectorLabels(cluster))
	labels[LabelManagedBy] = "steward"
	labels[stewardv1.LabelMember] = member
	labels[stewardv1.LabelVoter] = strconv.FormatBool(voter)
	return labels
}

func dataVolume(member string, t *stewardv1.MemberTemplate) corev1.Volume {
	if t.Storage.Medium == stewardv1.StorageMediumMemory {
		return corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: t.Storage.Size},
		}}
	}
	return corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: PVCName(member)},
	}}
}

// Args are etcd's flags for the member: identity and URLs first, then the typed options, then the
// user's extraArgs in name order, so the same template always yields the same command line.
func Args(m Member) []string {
	ec, t := m.Cluster, m.Template
	args := []string{
		"--name=" + m.Name,
		"--data-dir=" + DataMountPath + "/data",
		fmt.Sprintf("--listen-peer-urls=%s://0.0.0.0:%d", PeerScheme(ec), PeerPort),
		fmt.Sprintf("--listen-client-urls=%s://0.0.0.0:%d", Scheme(ec), ClientPort),
		// Metrics and /health stay plaintext on their own port, for probes and scrapers.
		fmt.Sprintf("--listen-metrics-urls=http://0.0.0.0:%d", MetricsPort),
		"--initial-advertise-peer-urls=" + PeerURL(ec, m.Name),
		"--advertise-client-urls=" + ClientURL(ec, m.Name),
		"--initial-cluster=" + m.Bootstrap.InitialCluster,
		"--initial-cluster-state=" + string(m.Bootstrap.State),
		"--initial-cluster-token=" + ClusterToken(ec),
	}
	if m.Bootstrap.ForceNewCluster {
		args = append(args, "--force-new-cluster=true")
	}
	f := func(key string) string { return TLSMountPath + "/" + key }
	if ec.TLSEnabled() {
		args = append(args,
			"--cert-file="+f(KeyServerCert), "--key-file="+f(KeyServerKey),
			"--client-cert-auth=true", "--trusted-ca-file="+f(KeyClientCA))
	}
	if ec.PeerTLSEnabled() {
		args = append(args,
			"--peer-cert-file="+f(KeyPeerCert), "--peer-key-file="+f(KeyPeerKey),
			"--peer-client-cert-auth=true", "--peer-trusted-ca-file="+f(KeyPeerCA),
			// etcd would also resolve the DNS names of a connecting peer's certificate and
			// require one to point at the peer's IP; a joining member's DNS record appears only
			// after its Pod is running, so its first connections fail and it crash-loops. The
			// chain to the cluster's own CA still authenticates every peer.
			"--"+skipPeerSANFlag(t.Version)+"=true",
		)
		if operatorCA(ec) {
			// One CA signs both planes' certificates: only those naming the peer identity (pki.
			// PeerIdentity, which resources cannot import) pass the peer port, so the clients'
			// certificates, which name no host, are refused there.
			args = append(args, "--peer-cert-allowed-hostname="+PeerServiceName(ec.Name)+"."+ec.Namespace+".svc")
		}
	}
	args = append(args, crlArgs(ec)...)
	args = append(args, optionArgs(&t.Options)...)
	args = append(args, corruptionArgs(t)...)
	for _, k := range slices.Sorted(maps.Keys(t.Options.ExtraArgs)) {
		if k == "feature-gates" && !upTo35(t.Version) {
			continue // merged into corruptionArgs' --feature-gates
		}
		args = append(args, "--"+k+"="+t.Options.ExtraArgs[k])
	}
	return args
}

// CorruptCheckTime is how often the leader compares every member's hash of the keyspace; a
// mismatch raises CORRUPT, which Steward answers by replacing the odd member.
const CorruptCheckTime = "5m0s"

// corruptionArgs turn on etcd's corruption checks: at startup (a member whose data differs from
// the cluster's refuses to serve) and periodically. 3.6 moved the startup check behind a feature
// gate, which is merged with the user's own --feature-gates.
func corruptionArgs(t *stewardv1.MemberTemplate) []string {
	if upTo35(t.Version) {
		return []string{"--experimental-initial-corrupt-check=true", "--experimental-corrupt-check-time=" + CorruptCheckTime}
	}
	gates := "InitialCorruptCheck=true"
	if user := strings.TrimSpace(t.Options.ExtraArgs["feature-gates"]); user != "" {
		gates = user + "," + gates
	}
	return []string{"--corrupt-check-time=" + CorruptCheckTime, "--feature-gates=" + gates}
}

// operatorCA says whether a CA of Steward's own signs the cluster's certificates, and only
// those. An adopted TLS source's CA (spec.bootstrap.join.caSecretName) signed the source's own
// certificates too, which do not carry Steward's peer identity, so it is not: the cluster keeps
// the source's peer rule (any certificate of the CA passes the peer port), also after a CA
// rotation, since the flag is on every member's command line.
func operatorCA(ec *stewardv1.EtcdCluster) bool {
	if b := ec.Spec.Bootstrap; b != nil && b.Join != nil && b.Join.CASecretName != "" {
		return false
	}
	return ec.Spec.TLS == nil || ec.Spec.TLS.Peer.Source == "" || ec.Spec.TLS.Peer.Source == stewardv1.TLSSourceOperator
}

// skipPeerSANFlag is the flag's name for an etcd version: experimental up to 3.5, renamed in 3.6
// (the old name is gone in 3.7). A version that does not parse gets the current name.
func skipPeerSANFlag(version string) string {
	if upTo35(version) {
		return "experimental-peer-skip-client-san-verification"
	}
	return "peer-skip-client-san-verification"
}

func optionArgs(o *stewardv1.EtcdOptions) []string {
	var args []string
	add := func(flag, value string) { args = append(args, "--"+flag+"="+value) }
	if o.QuotaBackendBytes != nil {
		add("quota-backend-bytes", strconv.FormatInt(o.QuotaBackendBytes.Value(), 10))
	}
	if o.AutoCompactionMode != "" {
		add("auto-compaction-mode", string(o.AutoCompactionMode))
	}
	if o.AutoCompactionRetention != "" {
		add("auto-compaction-retention", o.AutoCompactionRetention)
	}
	if o.SnapshotCount != nil {
		add("snapshot-count", strconv.FormatInt(*o.SnapshotCount, 10))
	}
	if o.HeartbeatIntervalMillis != nil {
		add("heartbeat-interval", strconv.Itoa(int(*o.HeartbeatIntervalMillis)))
	}
	if o.ElectionTimeoutMillis != nil {
		add("election-timeout", strconv.Itoa(int(*o.ElectionTimeoutMillis)))
	}
	if o.MaxRequestBytes != nil {
		add("max-request-bytes", strconv.Itoa(int(*o.MaxRequestBytes)))
	}
	if o.LogLevel != "" {
		add("log-level", string(o.LogLevel))
	}
	return args
}
