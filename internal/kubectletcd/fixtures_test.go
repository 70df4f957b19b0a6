package kubectletcd

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgofake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// now is the fixed clock of every test: ages and expiries in golden files never drift.
var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(d)) }

func q(s string) *resource.Quantity { v := resource.MustParse(s); return &v }

// fixtureCluster is a settled 3-member TLS cluster "demo" in namespace "db" with a schedule,
// a NOSPACE-free history and one defragmentation on record.
func fixtureCluster() *stewardv1.EtcdCluster {
	ca, leaf, renew := at(5*365*24*time.Hour), at(60*24*time.Hour), at(30*24*time.Hour)
	member := func(name, id string, role stewardv1.MemberRole, db, inUse string, pct int32) stewardv1.MemberStatus {
		return stewardv1.MemberStatus{Name: name, ID: id, Role: role, Ready: true, Version: "3.6.16", Updated: true,
			DBSize: q(db), DBSizeInUse: q(inUse), Quota: q("2Gi"), QuotaUsedPercent: ptr.To(pct)}
	}
	return &stewardv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "db", CreationTimestamp: at(-72 * time.Hour)},
		Spec:       stewardv1.EtcdClusterSpec{Replicas: ptr.To[int32](3), MemberTemplate: stewardv1.MemberTemplate{Version: "3.6.16"}},
		Status: stewardv1.EtcdClusterStatus{
			ClusterID: "cdf818194e3a8c32", Replicas: 3, ReadyMembers: 3, UpdatedMembers: 3, CurrentTemplate: "5f3c2a1b",
			Members: []stewardv1.MemberStatus{
				member("demo-0", "8e9e05c52164694d", stewardv1.RoleFollower, "24Mi", "20Mi", 1),
				member("demo-1", "91bc3c398fb3c146", stewardv1.RoleLeader, "25Mi", "20Mi", 1),
				member("demo-2", "fd422379fda50e48", stewardv1.RoleFollower, "61Mi", "20Mi", 2),
			},
			TLS: &stewardv1.TLSStatus{CANotAfter: &ca, Certificates: []stewardv1.CertificateStatus{
				{Name: "ca", NotAfter: ca},
				{Name: "client", NotAfter: at(80 * 24 * time.Hour), RenewAt: &renew, Served: true},
				{Name: "demo-0/server", NotAfter: leaf, RenewAt: &renew, Served: true},
				{Name: "demo-1/server", NotAfter: at(61 * 24 * time.Hour), RenewAt: &renew, Served: true},
			}},
			Backup: &stewardv1.BackupSummary{LastSuccessfulBackup: &stewardv1.BackupRef{Name: "demo-hourly-29412360",
				Time: ptr.To(at(-40 * time.Minute)), Revision: 48213},
				Continuous: &stewardv1.ContinuousSummary{Schedule: "demo-hourly", DurableRevision: 51877, DurableTime: ptr.To(at(-4 * time.Second)),
					LagRevisions: 3, ReportedAt: ptr.To(at(-6 * time.Second)),
					LastDrill: &stewardv1.ChainDrill{Base: "demo-hourly-29412360", Time: at(-38 * time.Minute), Revision: 50112, Verified: true}}},
			Conditions: []metav1.Condition{
				{Type: "Available", Status: metav1.ConditionTrue, Reason: "QuorumHealthy", Message: "3 of 3 voters healthy", LastTransitionTime: at(-71 * time.Hour)},
				{Type: "Progressing", Status: metav1.ConditionFalse, Reason: "Reconciled", Message: "every member runs the observed template", LastTransitionTime: at(-70 * time.Hour)},
				{Type: "Degraded", Status: metav1.ConditionFalse, Reason: "AllMembersHealthy", Message: "no alarm, every member healthy", LastTransitionTime: at(-70 * time.Hour)},
			},
		},
	}
}

func fixtureMembers() []stewardv1.EtcdMember {
	var out []stewardv1.EtcdMember
	for i, n := range []string{"demo-0", "demo-1", "demo-2"} {
		m := stewardv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "db"},
			Spec:   stewardv1.EtcdMemberSpec{ClusterName: "demo", Ordinal: int32(i)},
			Status: stewardv1.EtcdMemberStatus{Phase: stewardv1.MemberRunning, Ready: true}}
		if n == "demo-2" {
			m.Status.Defragmentation = &stewardv1.MemberDefragmentation{Last: &stewardv1.DefragmentationResult{
				Time: at(-26 * time.Hour), Outcome: stewardv1.DefragmentationSucceeded, Trigger: stewardv1.DefragmentationThreshold,
				SizeBefore: q("140Mi"), SizeAfter: q("61Mi"), DurationMilliseconds: 812}}
		}
		out = append(out, m)
	}
	// A member of another cluster in the same namespace must not show up.
	out = append(out, stewardv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "other-0", Namespace: "db"},
		Spec: stewardv1.EtcdMemberSpec{ClusterName: "other"}})
	return out
}

var s3Destination = stewardv1.BackupStorage{S3: &stewardv1.S3Storage{Bucket: "backups", Endpoint: "http://s3.example:7070",
	CredentialsSecretRef: stewardv1.S3CredentialsRef{Name: "s3-credentials"}}}

func fixtureBackups() []stewardv1.EtcdBackup {
	mk := func(name string, created time.Duration, phase stewardv1.BackupPhase, rev int64, msg string) stewardv1.EtcdBackup {
		b := stewardv1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "db", CreationTimestamp: at(created)},
			Spec:   stewardv1.EtcdBackupSpec{ClusterName: "demo", Destination: s3Destination},
			Status: stewardv1.EtcdBackupStatus{Phase: phase, Revision: rev, Message: msg}}
		if phase == stewardv1.BackupSucceeded || phase == stewardv1.BackupFailed {
			b.Status.CompletionTime = ptr.To(at(created + time.Minute))
			b.Status.Size = 9_830_400
			b.Status.Verification = &stewardv1.BackupVerification{Verified: true}
		}
		return b
	}
	return []stewardv1.EtcdBackup{
		mk("demo-hourly-29412300", -101*time.Minute, stewardv1.BackupFailed, 0, "no quorum: 1 of 3 voters healthy"),
		mk("demo-hourly-29412360", -41*time.Minute, stewardv1.BackupSucceeded, 48213, ""),
	}
}

// Secret values the report test looks for: none may appear in a bundle.
var secretValues = []string{"AKIA-SECRET-ACCESS-KEY-ID", "s3cr3t-Acc3ss-K3y", "-----BEGIN EC PRIVATE KEY-----\nfixture-client-key"}

func fixtureCore() []client.Object {
	secret := func(name string, data map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "db"}, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "db", Labels: map[string]string{"etcd.steward.dev/cluster": "demo"}},
			Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd"}}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", RestartCount: 1}}}}
	}
	return []client.Object{
		secret("s3-credentials", map[string]string{"accessKeyID": secretValues[0], "secretAccessKey": secretValues[1]}),
		secret("demo-client-tls", map[string]string{"tls.key": secretValues[2], "tls.crt": "c", "ca.crt": "a"}),
		secret("unrelated", map[string]string{"password": "not-ours"}),
		pod("demo-0"), pod("demo-1"), pod("demo-2"),
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-demo-0", Namespace: "db", Labels: map[string]string{"etcd.steward.dev/cluster": "demo"}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "demo-client", Namespace: "db"}},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "demo.1", Namespace: "db"}, Reason: "Defragmented",
			InvolvedObject: corev1.ObjectReference{Kind: "EtcdCluster", Name: "demo"}, Message: "demo-2: 140.0MiB -> 61.0MiB"},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "x.1", Namespace: "db"}, Reason: "Other",
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "x"}, Message: "unrelated event"},
	}
}

type harness struct {
	env     *Env
	client  client.Client
	out     *bytes.Buffer
	patches []string
}

// newHarness builds an Env over a fake API server holding objs; funcs intercept calls (to make
// them forbidden, say).
func newHarness(t *testing.T, funcs *interceptor.Funcs, objs ...client.Object) *harness {
	t.Helper()
	h := &harness{out: &bytes.Buffer{}}
	b := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(objs...).
		WithStatusSubresource(&stewardv1.EtcdCluster{}, &stewardv1.EtcdMember{}, &stewardv1.EtcdBackup{})
	f := interceptor.Funcs{}
	if funcs != nil {
		f = *funcs
	}
	inner := f.Patch
	f.Patch = func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		data, _ := patch.Data(obj)
		h.patches = append(h.patches, string(data))
		if inner != nil {
			return inner(ctx, c, obj, patch, opts...)
		}
		return c.Patch(ctx, obj, patch, opts...)
	}
	h.client = b.WithInterceptorFuncs(f).Build()
	h.env = &Env{Out: h.out, Err: h.out, In: strings.NewReader(""), Client: h.client, Clientset: clientgofake.NewClientset(),
		Namespace: "db", Now: func() time.Time { return now }}
	return h
}

func allFixtures() []client.Object {
	objs := []client.Object{fixtureCluster()}
	for _, m := range fixtureMembers() {
		objs = append(objs, &m)
	}
	for _, b := range fixtureBackups() {
		objs = append(objs, &b)
	}
	return append(objs, fixtureCore()...)
}

// run executes the plugin's command line against the harness.
func (h *harness) run(t *testing.T, args ...string) error {
	t.Helper()
	root := NewRootCommand(h.env)
	root.SetArgs(args)
	root.SetOut(h.out)
	root.SetErr(h.out)
	return root.ExecuteContext(context.Background())
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/kubectletcd/ -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
