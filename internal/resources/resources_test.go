package resources

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func cluster(mutate func(*stewardv1.EtcdCluster)) *stewardv1.EtcdCluster {
	size := resource.MustParse("2Gi")
	ec := &stewardv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "uid-1"},
		Spec: stewardv1.EtcdClusterSpec{
			Replicas:       ptr.To[int32](3),
			MemberTemplate: stewardv1.MemberTemplate{Version: "3.6.16", Storage: stewardv1.StorageSpec{Size: &size}},
		},
	}
	if mutate != nil {
		mutate(ec)
	}
	return ec
}

func member(ec *stewardv1.EtcdCluster) Member {
	return Member{Cluster: ec, Name: "db-1", Template: &ec.Spec.MemberTemplate, Voter: true,
		Bootstrap: Bootstrap{InitialCluster: "db-0=http://db-0.db.ns.svc:2380,db-1=http://db-1.db.ns.svc:2380", State: StateExisting}}
}

func TestNames(t *testing.T) {
	plain := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"},
		Spec: stewardv1.EtcdClusterSpec{TLS: &stewardv1.TLSSpec{Enabled: ptr.To(false)}}}
	if got := PeerURL(plain, "db-2"); got != "http://db-2.db.ns.svc:2380" {
		t.Errorf("PeerURL = %s", got)
	}
	if got := ClientURL(plain, "db-2"); got != "http://db-2.db.ns.svc:2379" {
		t.Errorf("ClientURL = %s", got)
	}
	secure := plain.DeepCopy()
	secure.Spec.TLS = nil // on by default
	if got := PeerURL(secure, "db-2"); got != "https://db-2.db.ns.svc:2380" {
		t.Errorf("PeerURL with TLS = %s", got)
	}
	if got := ClientURL(secure, "db-2"); got != "https://db-2.db.ns.svc:2379" {
		t.Errorf("ClientURL with TLS = %s", got)
	}
	if MemberName("db", 7) != "db-7" || PVCName("db-7") != "data-db-7" || ClientServiceName("db") != "db-client" {
		t.Error("member, PVC or client Service name changed: existing clusters would be orphaned")
	}
	a, b := cluster(nil), cluster(func(c *stewardv1.EtcdCluster) { c.UID = "uid-2" })
	if ClusterToken(a) == ClusterToken(b) {
		t.Error("a recreated cluster of the same name must get a new --initial-cluster-token")
	}
}

func TestOrdinalOf(t *testing.T) {
	cases := []struct {
		cluster, member string
		want            int32
		ok              bool
	}{
		{"db", "db-0", 0, true},
		{"db", "db-12", 12, true},
		{"db-a", "db-a-3", 3, true},
		{"db", "db-a-3", 0, false},
		{"db", "other-1", 0, false},
		{"db", "db-01", 0, false},
		{"db", "db--1", 0, false},
		{"db", "db-", 0, false},
	}
	for _, c := range cases {
		got, ok := OrdinalOf(c.cluster, c.member)
		if got != c.want || ok != c.ok {
			t.Errorf("OrdinalOf(%q, %q) = %d, %v; want %d, %v", c.cluster, c.member, got, ok, c.want, c.ok)
		}
	}
}

func TestPodPVCMember(t *testing.T) {
	ec := cluster(func(c *stewardv1.EtcdCluster) {
		c.Spec.PodMetadata.Labels = map[string]string{"team": "a", stewardv1.LabelCluster: "hijack"}
		c.Spec.PodMetadata.Annotations = map[string]string{"note": "x"}
		c.Spec.NodeSelector = map[string]string{"disk": "ssd"}
		c.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	})
	pod := Pod(member(ec), "repo/etcd")
	c := pod.Spec.Containers[0]
	if c.Image != "repo/etcd:v3.6.16" {
		t.Errorf("image = %s", c.Image)
	}
	if pod.Spec.Hostname != "db-1" || pod.Spec.Subdomain != "db" {
		t.Errorf("hostname/subdomain = %s/%s; the peer URL would not resolve", pod.Spec.Hostname, pod.Spec.Subdomain)
	}
	if pod.Labels["team"] != "a" || pod.Labels[stewardv1.LabelCluster] != "db" || pod.Labels[stewardv1.LabelVoter] != "true" {
		t.Errorf("labels = %v: user labels must be kept but never override Steward's", pod.Labels)
	}
	if pod.Annotations["note"] != "x" || pod.Spec.NodeSelector["disk"] != "ssd" {
		t.Error("podMetadata annotations or nodeSelector lost")
	}
	if c.Resources.Limits.Memory().String() != "1Gi" {
		t.Errorf("resources = %v", c.Resources)
	}
	if v := pod.Spec.Volumes[0]; v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "data-db-1" {
		t.Errorf("data volume = %+v, want the member's PVC", v)
	}
	if pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks {
		t.Error("service links must be off: etcd parses ETCD_* environment variables as flags")
	}
	// The template's maps are copied, not shared: mutating the Pod must not edit the spec.
	pod.Labels["team"] = "b"
	if ec.Spec.PodMetadata.Labels["team"] != "a" {
		t.Error("Pod shares its label map with the template")
	}
}

func TestPodMemoryMember(t *testing.T) {
	ec := cluster(func(c *stewardv1.EtcdCluster) {
		c.Spec.Storage.Medium = stewardv1.StorageMediumMemory
		c.Spec.Image = "mirror/etcd:custom"
		c.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
	})
	m := member(ec)
	m.Voter = false
	pod := Pod(m, "repo/etcd")
	v := pod.Spec.Volumes[0]
	if v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory || v.EmptyDir.SizeLimit.String() != "2Gi" {
		t.Errorf("data volume = %+v, want a 2Gi tmpfs", v)
	}
	if pod.Spec.Containers[0].Image != "mirror/etcd:custom" {
		t.Errorf("image override ignored: %s", pod.Spec.Containers[0].Image)
	}
	if pod.Spec.Affinity.PodAntiAffinity != nil || pod.Spec.Affinity.NodeAffinity == nil {
		t.Error("a user affinity must replace the default, not merge with it")
	}
	if pod.Labels[stewardv1.LabelVoter] != "false" {
		t.Error("a learner must not carry the voter label (the client Service would route to it)")
	}
	if PVC(ec, "db-1", &ec.Spec.MemberTemplate) != nil {
		t.Error("memory members have no PVC")
	}
}

func TestArgs(t *testing.T) {
	ec := cluster(func(c *stewardv1.EtcdCluster) {
		c.Spec.Options = stewardv1.EtcdOptions{
			QuotaBackendBytes: ptr.To(resource.MustParse("4Gi")), AutoCompactionMode: "periodic",
			AutoCompactionRetention: "1h", SnapshotCount: ptr.To[int64](5000),
			HeartbeatIntervalMillis: ptr.To[int32](150), ElectionTimeoutMillis: ptr.To[int32](1500),
			MaxRequestBytes: ptr.To[int32](2097152), LogLevel: "warn",
			ExtraArgs: map[string]string{"log-outputs": "stderr", "experimental-x": "1"},
		}
	})
	args := Args(member(ec))
	for _, want := range []string{
		"--name=db-1", "--data-dir=/var/lib/etcd/data",
		"--initial-advertise-peer-urls=https://db-1.db.ns.svc:2380",
		"--advertise-client-urls=https://db-1.db.ns.svc:2379",
		"--listen-client-urls=https://0.0.0.0:2379", "--listen-metrics-urls=http://0.0.0.0:2381",
		"--client-cert-auth=true", "--peer-client-cert-auth=true",
		"--trusted-ca-file=/etc/etcd/tls/client-ca.crt", "--peer-trusted-ca-file=/etc/etcd/tls/peer-ca.crt",
		"--peer-cert-allowed-hostname=db.ns.svc",
		"--initial-cluster=db-0=http://db-0.db.ns.svc:2380,db-1=http://db-1.db.ns.svc:2380",
		"--initial-cluster-state=existing", "--initial-cluster-token=db-uid-1",
		"--quota-backend-bytes=4294967296", "--auto-compaction-mode=periodic", "--auto-compaction-retention=1h",
		"--snapshot-count=5000", "--heartbeat-interval=150", "--election-timeout=1500",
		"--max-request-bytes=2097152", "--log-level=warn",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("missing %s in %v", want, args)
		}
	}
	// extraArgs come last and in name order, so an unchanged template means an unchanged command.
	tail := args[len(args)-2:]
	if !slices.Equal(tail, []string{"--experimental-x=1", "--log-outputs=stderr"}) {
		t.Errorf("extraArgs = %v", tail)
	}
	// Unset options add no flags: etcd keeps its own defaults.
	plain := Args(member(cluster(nil)))
	for _, a := range plain {
		if strings.HasPrefix(a, "--snapshot-count") || strings.HasPrefix(a, "--log-level") {
			t.Errorf("unset option produced %s", a)
		}
	}
}

// A plaintext cluster listens on http and names no TLS file; a TLS one mounts its member Secret
// and records the trust it starts with.
func TestPodTLS(t *testing.T) {
	plain := cluster(func(c *stewardv1.EtcdCluster) { c.Spec.TLS = &stewardv1.TLSSpec{Enabled: ptr.To(false)} })
	for _, a := range Args(member(plain)) {
		if strings.Contains(a, "https") || strings.Contains(a, "cert") || strings.Contains(a, "tls") {
			t.Errorf("plaintext cluster got %s", a)
		}
	}
	if p := Pod(member(plain), "repo"); len(p.Spec.Volumes) != 1 || p.Annotations[stewardv1.AnnotationTrust] != "" {
		t.Errorf("plaintext Pod volumes %v annotations %v", p.Spec.Volumes, p.Annotations)
	}
	user := cluster(func(c *stewardv1.EtcdCluster) {
		c.Spec.TLS = &stewardv1.TLSSpec{Peer: stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret, SecretName: "p"}}
	})
	if slices.ContainsFunc(Args(member(user)), func(a string) bool { return strings.HasPrefix(a, "--peer-cert-allowed-hostname") }) {
		t.Error("the peer identity is Steward's CA's; a user's certificates need not carry it")
	}
	peersPlain := Args(member(cluster(func(c *stewardv1.EtcdCluster) {
		c.Spec.TLS = &stewardv1.TLSSpec{Peer: stewardv1.TLSPlane{Enabled: ptr.To(false)}}
	})))
	for _, want := range []string{"--listen-peer-urls=http://0.0.0.0:2380", "--listen-client-urls=https://0.0.0.0:2379",
		"--initial-advertise-peer-urls=http://", "--advertise-client-urls=https://", "--cert-file=", "--client-cert-auth=true"} {
		if !slices.ContainsFunc(peersPlain, func(a string) bool { return strings.HasPrefix(a, want) }) {
			t.Errorf("plaintext peers, TLS clients: no %s in %v", want, peersPlain)
		}
	}
	if slices.ContainsFunc(peersPlain, func(a string) bool { return strings.HasPrefix(a, "--peer-") || strings.Contains(a, "peer-skip") }) {
		t.Errorf("plaintext peers got peer TLS flags: %v", peersPlain)
	}
	adopted := cluster(func(c *stewardv1.EtcdCluster) {
		c.Spec.Bootstrap = &stewardv1.BootstrapSpec{Join: &stewardv1.JoinSpec{Endpoints: []string{"https://etcd-0:2379"}, CASecretName: "src-ca"}}
	})
	if slices.ContainsFunc(Args(member(adopted)), func(a string) bool { return strings.HasPrefix(a, "--peer-cert-allowed-hostname") }) {
		t.Error("the CA is the adopted source's: its members' peer certificates do not carry Steward's peer identity")
	}
	m := member(cluster(nil))
	m.Trust = "abc,def"
	p := Pod(m, "repo")
	if p.Annotations[stewardv1.AnnotationTrust] != "abc,def" {
		t.Errorf("trust annotation = %q", p.Annotations[stewardv1.AnnotationTrust])
	}
	var found bool
	for _, v := range p.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == "db-1-tls" {
			found = true
		}
	}
	mounted := slices.ContainsFunc(p.Spec.Containers[0].VolumeMounts, func(vm corev1.VolumeMount) bool {
		return vm.MountPath == TLSMountPath && vm.ReadOnly
	})
	if !found || !mounted {
		t.Errorf("TLS Secret volume %v mounted %v", found, mounted)
	}
}

func TestSkipPeerSANFlag(t *testing.T) {
	for v, want := range map[string]string{
		"3.5.35": "experimental-peer-skip-client-san-verification", "3.4.1": "experimental-peer-skip-client-san-verification",
		"3.6.16": "peer-skip-client-san-verification", "3.7.3": "peer-skip-client-san-verification",
		"v3.6.0": "peer-skip-client-san-verification", "custom": "peer-skip-client-san-verification",
	} {
		if got := skipPeerSANFlag(v); got != want {
			t.Errorf("%s: %s, want %s", v, got, want)
		}
	}
}

func TestServices(t *testing.T) {
	ec := cluster(nil)
	peer, client := PeerService(ec), ClientService(ec)
	if peer.Spec.ClusterIP != corev1.ClusterIPNone || !peer.Spec.PublishNotReadyAddresses {
		t.Error("the peer Service must be headless and publish not-ready members (joiners need DNS)")
	}
	if client.Spec.Selector[stewardv1.LabelVoter] != "true" {
		t.Error("the client Service must select voters only")
	}
	if _, ok := peer.Spec.Selector[stewardv1.LabelVoter]; ok {
		t.Error("the peer Service must include learners")
	}
}

func TestPDB(t *testing.T) {
	cases := []struct {
		name     string
		replicas int32
		voters   int // voter Pods now
		spec     *stewardv1.PodDisruptionBudgetSpec
		want     int32 // -1: no PDB
	}{
		{"default 3", 3, 3, nil, 2},
		{"default 5 keeps 4", 5, 5, nil, 4},
		{"single member", 1, 1, nil, 0},
		{"dormant", 0, 0, nil, 0},
		// The budget counts the Pods it selects: with one voter more than spec.replicas (an
		// add-first surge, a scale-in under way) replicas-1 would let two evictions through.
		{"an add-first surge: 4 voters for 3 keeps 3", 3, 4, nil, 3},
		{"scaling in from 5 to 3, 5 voters still: keeps 4", 3, 5, nil, 4},
		{"scaling out from 3 to 5, 3 voters yet: keeps 4 (no eviction)", 5, 3, nil, 4},
		{"override", 5, 5, &stewardv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To[int32](3)}, 3},
		{"disabled", 3, 3, &stewardv1.PodDisruptionBudgetSpec{Enabled: ptr.To(false)}, -1},
		{"explicitly enabled", 3, 3, &stewardv1.PodDisruptionBudgetSpec{Enabled: ptr.To(true)}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ec := cluster(func(e *stewardv1.EtcdCluster) {
				e.Spec.Replicas = ptr.To(c.replicas)
				e.Spec.PodDisruptionBudget = c.spec
			})
			pdb := PDB(ec, c.voters)
			if c.want < 0 {
				if pdb != nil {
					t.Fatal("disabled budget still built")
				}
				return
			}
			if got := pdb.Spec.MinAvailable.IntVal; got != c.want {
				t.Errorf("minAvailable = %d, want %d", got, c.want)
			}
		})
	}
}

func TestPVC(t *testing.T) {
	ec := cluster(func(c *stewardv1.EtcdCluster) { c.Spec.Storage.StorageClassName = ptr.To("fast") })
	pvc := PVC(ec, "db-0", &ec.Spec.MemberTemplate)
	if pvc.Name != "data-db-0" || *pvc.Spec.StorageClassName != "fast" {
		t.Errorf("pvc = %s class %v", pvc.Name, pvc.Spec.StorageClassName)
	}
	if got := pvc.Spec.Resources.Requests.Storage().String(); got != "2Gi" {
		t.Errorf("request = %s", got)
	}
}
