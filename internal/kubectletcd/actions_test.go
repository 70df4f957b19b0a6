package kubectletcd

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func TestPauseResume(t *testing.T) {
	h := newHarness(t, nil, allFixtures()...)
	if err := h.run(t, "pause", "demo"); err != nil {
		t.Fatal(err)
	}
	ec, _ := getCluster(context.Background(), h.env, "demo")
	if !ec.Spec.Paused {
		t.Fatal("pause did not set spec.paused")
	}
	if err := h.run(t, "resume", "demo"); err != nil {
		t.Fatal(err)
	}
	ec, _ = getCluster(context.Background(), h.env, "demo")
	if ec.Spec.Paused {
		t.Fatal("resume did not clear spec.paused")
	}
	if want := []string{`{"spec":{"paused":true}}`, `{"spec":{"paused":null}}`}; !slices.Equal(h.patches, want) {
		t.Fatalf("patches %q, want merge patches of spec.paused alone %q", h.patches, want)
	}
	golden(t, "pause.golden", h.out.Bytes())
}

func TestBackupCopiesDestination(t *testing.T) {
	sched := &stewardv1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "demo-hourly", Namespace: "db"},
		Spec: stewardv1.EtcdBackupScheduleSpec{Schedule: "@hourly", Verify: true,
			Template: stewardv1.EtcdBackupSpec{ClusterName: "demo", Destination: stewardv1.BackupStorage{
				Volume: &stewardv1.VolumeStorage{PersistentVolumeClaimName: "backups"}}}}}
	h := newHarness(t, nil, append(allFixtures(), sched)...)
	if err := h.run(t, "backup", "demo", "--name", "now"); err != nil {
		t.Fatal(err)
	}
	var b stewardv1.EtcdBackup
	if err := h.client.Get(context.Background(), types.NamespacedName{Namespace: "db", Name: "now"}, &b); err != nil {
		t.Fatal(err)
	}
	if b.Spec.ClusterName != "demo" || b.Spec.Destination.Volume == nil || !b.Spec.Verify {
		t.Fatalf("backup spec %+v: want the schedule's volume destination and verify", b.Spec)
	}
	// --like names a backup: its S3 destination wins over the schedule.
	if err := h.run(t, "backup", "demo", "--name", "now2", "--like", "demo-hourly-29412360"); err != nil {
		t.Fatal(err)
	}
	if err := h.client.Get(context.Background(), types.NamespacedName{Namespace: "db", Name: "now2"}, &b); err != nil {
		t.Fatal(err)
	}
	if b.Spec.Destination.S3 == nil || b.Spec.Destination.S3.Bucket != "backups" {
		t.Fatalf("--like: destination %+v", b.Spec.Destination)
	}
	golden(t, "backup.golden", h.out.Bytes())

	// Without any backup or schedule there is no destination to copy: say what to do.
	h = newHarness(t, nil, fixtureCluster())
	err := h.run(t, "backup", "demo")
	if err == nil || !strings.Contains(err.Error(), "no backup destination known") {
		t.Fatalf("got %v", err)
	}
}

func TestRestore(t *testing.T) {
	h := newHarness(t, nil, allFixtures()...)
	if err := h.run(t, "restore", "demo-hourly-29412300", "--into", "demo2"); err == nil || !strings.Contains(err.Error(), "is Failed, not Succeeded") {
		t.Fatalf("restore of a failed backup: %v", err)
	}
	if err := h.run(t, "restore", "demo-hourly-29412360", "--into", "demo"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("restore into an existing cluster: %v", err)
	}
	h.out.Reset()
	if err := h.run(t, "restore", "demo-hourly-29412360", "--into", "demo-restored", "--dry-run"); err != nil {
		t.Fatal(err)
	}
	golden(t, "restore-dry-run.golden", h.out.Bytes())
	if err := h.run(t, "restore", "demo-hourly-29412360", "--into", "demo-restored"); err != nil {
		t.Fatal(err)
	}
	ec, err := getCluster(context.Background(), h.env, "demo-restored")
	if err != nil {
		t.Fatal(err)
	}
	if r := ec.Spec.Bootstrap; r == nil || r.Restore == nil || r.Restore.BackupName != "demo-hourly-29412360" || ec.Spec.Version != "3.6.16" {
		t.Fatalf("restored spec %+v", ec.Spec)
	}
}

func TestDefragAsksTheOperator(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 12, 30, 0, time.UTC)
	for _, tt := range []struct {
		name, member string
		want         []string // members the request lands on
	}{{"every member", "", []string{"demo"}}, {"one member", "demo-1", []string{"demo-1"}}} {
		t.Run(tt.name, func(t *testing.T) {
			// The operator, faked: once asked, the cluster's status shows a defragmentation after it
			// for each asked member. The members' own records say otherwise (an hour on, 0 ms): the
			// command reads the cluster's status, which is what users read next.
			var h *harness
			funcs := &interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if err := c.Get(ctx, key, obj, opts...); err != nil {
					return err
				}
				ec, ok := obj.(*stewardv1.EtcdCluster)
				if !ok || len(h.patches) == 0 {
					return nil
				}
				for i := range ec.Status.Members {
					if tt.member == "" || ec.Status.Members[i].Name == tt.member {
						ec.Status.Members[i].Defragmentation = &stewardv1.MemberDefragmentation{Last: &stewardv1.DefragmentationResult{
							Time: metav1.NewTime(now.Add(time.Duration(i+1) * time.Second)), Outcome: stewardv1.DefragmentationSucceeded,
							Trigger: stewardv1.DefragmentationRequested, DurationMilliseconds: 40}}
					}
				}
				return nil
			}, List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if err := c.List(ctx, list, opts...); err != nil {
					return err
				}
				if ml, ok := list.(*stewardv1.EtcdMemberList); ok && len(h.patches) > 0 {
					for i := range ml.Items {
						ml.Items[i].Status.Defragmentation = &stewardv1.MemberDefragmentation{Last: &stewardv1.DefragmentationResult{
							Time: metav1.NewTime(now.Add(time.Hour)), Outcome: stewardv1.DefragmentationSucceeded}}
					}
				}
				return nil
			}}
			h = newHarness(t, funcs, allFixtures()...)
			h.env.Now = func() time.Time { return now }
			args := []string{"defrag", "demo"}
			if tt.member != "" {
				args = append(args, tt.member)
			}
			if err := h.run(t, args...); err != nil {
				t.Fatal(err)
			}
			if len(h.patches) != 1 || !strings.Contains(h.patches[0], stewardv1.AnnotationDefragmentRequested) ||
				!strings.Contains(h.patches[0], "2026-12-01T00:12:30Z") || strings.Contains(h.patches[0], "spec") {
				t.Fatalf("patches %q: want only the request annotation, never the spec", h.patches)
			}
			var obj client.Object = &stewardv1.EtcdCluster{}
			if tt.member != "" {
				obj = &stewardv1.EtcdMember{}
			}
			if err := h.client.Get(context.Background(), client.ObjectKey{Namespace: h.env.Namespace, Name: tt.want[0]}, obj); err != nil {
				t.Fatal(err)
			}
			if obj.GetAnnotations()[stewardv1.AnnotationDefragmentRequested] != "2026-12-01T00:12:30Z" {
				t.Fatalf("%s annotations %v", tt.want[0], obj.GetAnnotations())
			}
			if tt.member == "" {
				golden(t, "defrag.golden", h.out.Bytes())
			} else if got := strings.Count(h.out.String(), "Succeeded"); got != 1 {
				t.Fatalf("reported %d members, want 1:\n%s", got, h.out.String())
			}
		})
	}
}

func TestDefragRefusals(t *testing.T) {
	ec := fixtureCluster()
	ec.Spec.Replicas = ptr.To[int32](1)
	h := newHarness(t, nil, ec)
	if err := h.run(t, "defrag", "demo"); err == nil || !strings.Contains(err.Error(), "allowDowntime") {
		t.Fatalf("got %v", err)
	}
	h = newHarness(t, nil, allFixtures()...)
	if err := h.run(t, "defrag", "demo", "demo-9"); err == nil || !strings.Contains(err.Error(), `no member "demo-9"`) {
		t.Fatalf("got %v", err)
	}
}

func TestReportRedactsSecrets(t *testing.T) {
	h := newHarness(t, nil, allFixtures()...)
	file := filepath.Join(t.TempDir(), "r.tar.gz")
	if err := h.run(t, "report", "demo", "-f", file, "--operator-namespace", ""); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	files := untar(t, data)
	for _, want := range []string{"demo-report/etcdcluster.yaml", "demo-report/status.txt", "demo-report/status.yaml",
		"demo-report/etcdmembers/demo-0.yaml", "demo-report/etcdbackups/demo-hourly-29412360.yaml", "demo-report/pods/demo-1.yaml",
		"demo-report/logs/demo-1/etcd.log", "demo-report/logs/demo-1/etcd.previous.log", "demo-report/pvcs/data-demo-0.yaml",
		"demo-report/services/demo-client.yaml", "demo-report/events.yaml", "demo-report/secrets.yaml"} {
		if _, ok := files[want]; !ok {
			t.Errorf("bundle lacks %s (has %v)", want, keys(files))
		}
	}
	if _, ok := files["demo-report/etcdmembers/other-0.yaml"]; ok {
		t.Error("another cluster's member is in the bundle")
	}
	if ev := files["demo-report/events.yaml"]; !strings.Contains(ev, "Defragmented") || strings.Contains(ev, "unrelated event") {
		t.Errorf("events.yaml:\n%s", ev)
	}
	sec := files["demo-report/secrets.yaml"]
	for _, want := range []string{"name: s3-credentials", "- secretAccessKey", "name: demo-client-tls", "- tls.key"} {
		if !strings.Contains(sec, want) {
			t.Errorf("secrets.yaml lacks %q:\n%s", want, sec)
		}
	}
	if strings.Contains(sec, "unrelated") {
		t.Errorf("secrets.yaml lists a Secret unrelated to the cluster:\n%s", sec)
	}
	for name, content := range files {
		for _, v := range append(slices.Clone(secretValues), "not-ours") {
			for _, form := range []string{v, base64.StdEncoding.EncodeToString([]byte(v)), strings.SplitN(v, "\n", 2)[len(strings.SplitN(v, "\n", 2))-1]} {
				if strings.Contains(content, form) {
					t.Errorf("%s holds a Secret value %q", name, form)
				}
			}
		}
	}
}

func untar(t *testing.T, data []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[hdr.Name] = string(b)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// fakeForward stands in for kubectl port-forward: each member "listens" at a fixed address.
type fakeForward map[string]string

func (f fakeForward) Forward(_ context.Context, _, pod string, _ int) (string, func(), error) {
	return f[pod], func() {}, nil
}

func TestEtcdctlPassesFlagsAndExitCode(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "etcdctl")
	// A stand-in etcdctl: prints its arguments and the files it was handed, exits 3.
	body := "#!/bin/sh\necho \"$@\"\nfor a in \"$@\"; do case $a in --cacert=*|--cert=*|--key=*) f=${a#*=}; test -r \"$f\" && echo \"readable ${f##*/} $(stat -c %a \"$f\")\";; esac; done\necho \"$@\" | tr ' ' '\\n' | grep -- --key= | cut -d= -f2 > " + filepath.Join(dir, "keypath") + "\nexit 3\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, nil, allFixtures()...)
	h.env.Forward = fakeForward{"demo-0": "127.0.0.1:40000", "demo-1": "127.0.0.1:40001", "demo-2": "127.0.0.1:40002"}
	err := h.run(t, "etcdctl", "demo", "--etcdctl", script, "--", "endpoint", "status", "-w", "table")
	if !errors.Is(err, exitCode(3)) {
		t.Fatalf("exit: %v, want etcdctl's status 3 passed through", err)
	}
	out := h.out.String()
	for _, want := range []string{"--endpoints=https://127.0.0.1:40000 ", "endpoint status -w table", "readable ca.crt 600", "readable tls.crt 600", "readable tls.key 600"} {
		if !strings.Contains(out, want) {
			t.Errorf("etcdctl saw %q, want %q in it", out, want)
		}
	}
	keyPath, _ := os.ReadFile(filepath.Join(dir, "keypath"))
	if _, err := os.Stat(filepath.Dir(strings.TrimSpace(string(keyPath)))); !os.IsNotExist(err) {
		t.Errorf("the certificate directory %s was not removed: %v", keyPath, err)
	}

	h.out.Reset()
	if err := h.run(t, "etcdctl", "demo", "--all", "--etcdctl", script, "--", "endpoint", "health"); !errors.Is(err, exitCode(3)) {
		t.Fatal(err)
	}
	if !strings.Contains(h.out.String(), "--endpoints=https://127.0.0.1:40000,https://127.0.0.1:40001,https://127.0.0.1:40002 ") {
		t.Errorf("--all: %s", h.out)
	}
	if err := h.run(t, "etcdctl", "demo", "--member", "demo-9", "--etcdctl", script); err == nil || !strings.Contains(err.Error(), `no member "demo-9"`) {
		t.Errorf("--member demo-9: %v", err)
	}
}

// TestRequestTimeAfterTheLastDefragmentation: a second request made in the second the last
// defragmentation was recorded is stamped with the next second, so neither the operator nor the
// wait reads the old record as its answer (e2e TestPlugin: `defrag plug plug-1` returned at once,
// plug-1 not defragmented again, when it ran in the second the first round's plug-1 finished).
func TestRequestTimeAfterTheLastDefragmentation(t *testing.T) {
	base := time.Date(2026, 12, 3, 14, 11, 54, 0, time.UTC)
	clock := base.Add(300 * time.Millisecond)
	now := func() time.Time { return clock }
	var slept time.Duration
	sleep := func(d time.Duration) { slept += d; clock = clock.Add(d) }
	if got := requestTime(now, sleep, base); !got.Equal(base.Add(time.Second)) || slept != 700*time.Millisecond {
		t.Errorf("same second as the last record: asked %s after sleeping %s, want %s after 700ms", got, slept, base.Add(time.Second))
	}
	slept = 0
	if got := requestTime(now, sleep, base.Add(-time.Hour)); !got.Equal(base.Add(time.Second)) || slept != 0 {
		t.Errorf("an older record: asked %s after sleeping %s, want now's second at once", got, slept)
	}
}

func TestRestoreToAPoint(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 14, 0, 0, 0, time.UTC)
	sched := &stewardv1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "demo-pitr", Namespace: "db"},
		Spec: stewardv1.EtcdBackupScheduleSpec{Schedule: "@hourly", Continuous: &stewardv1.ContinuousBackupSpec{SegmentSeconds: 5},
			Template: stewardv1.EtcdBackupSpec{ClusterName: "demo", Destination: stewardv1.BackupStorage{
				S3: &stewardv1.S3Storage{Bucket: "backups", CredentialsSecretRef: stewardv1.S3CredentialsRef{Name: "s3"}}}}},
		Status: stewardv1.EtcdBackupScheduleStatus{Continuous: &stewardv1.ContinuousBackupStatus{Restorable: []stewardv1.RestorableRange{
			{FromRevision: 100, ToRevision: 5000, FromTime: &metav1.Time{Time: t0}, ToTime: &metav1.Time{Time: t0.Add(time.Hour)}, Base: "demo-pitr-1"}}}}}
	h := newHarness(t, nil, append(allFixtures(), sched)...)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--schedule", "demo-pitr", "--to-revision", "6000"}, "revision 6000 is not durable yet"},
		{[]string{"--schedule", "demo-pitr", "--to-revision", "50"}, "revision 50 is not restorable: the restorable ranges are revisions 100-5000"},
		{[]string{"--schedule", "demo-pitr", "--to-time", "yesterday"}, "want RFC 3339"},
		{[]string{"--schedule", "demo-pitr"}, "exactly one of --to-revision and --to-time"},
		{[]string{"--to-revision", "5"}, "need --schedule"},
		{[]string{"demo-hourly-29412360", "--schedule", "demo-pitr", "--to-revision", "200"}, "not both"},
		{[]string{"--schedule", "nope", "--to-revision", "200"}, "nope"},
	} {
		if err := h.run(t, append([]string{"restore", "--into", "x"}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("restore %v: %v, want %q", tc.args, err, tc.want)
		}
	}
	h.out.Reset()
	if err := h.run(t, "restore", "--schedule", "demo-pitr", "--to-time", "2026-12-04T14:30:00Z", "--into", "demo-1430"); err != nil {
		t.Fatal(err)
	}
	out := h.out.String()
	for _, want := range []string{"revisions 100-5000 (2026-12-04T14:00:00Z to 2026-12-04T15:00:00Z, base demo-pitr-1)", "Will restore 2026-12-04T14:30:00Z", `"demo-1430" created`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	ec, err := getCluster(context.Background(), h.env, "demo-1430")
	if err != nil {
		t.Fatal(err)
	}
	p := ec.Spec.Bootstrap.Restore.PointInTime
	if p == nil || p.ScheduleName != "demo-pitr" || p.Time == nil || !p.Time.Equal(&metav1.Time{Time: t0.Add(30 * time.Minute)}) || ec.Spec.Version != "3.6.16" {
		t.Fatalf("restored spec %+v", ec.Spec.Bootstrap.Restore)
	}
}

// defragHarness fakes the operator's answer to a defragmentation request: once asked, every Get of
// the cluster shows, for member i at the n-th Get since, the result result(i, n) (nil: none).
func defragHarness(t *testing.T, now time.Time, result func(i, n int) *stewardv1.DefragmentationResult) *harness {
	t.Helper()
	gets := 0
	var h *harness
	funcs := &interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := c.Get(ctx, key, obj, opts...); err != nil {
			return err
		}
		ec, ok := obj.(*stewardv1.EtcdCluster)
		if !ok || len(h.patches) == 0 {
			return nil
		}
		gets++
		for i := range ec.Status.Members {
			if r := result(i, gets); r != nil {
				ec.Status.Members[i].Defragmentation = &stewardv1.MemberDefragmentation{Last: r}
			}
		}
		return nil
	}}
	h = newHarness(t, funcs, allFixtures()...)
	h.env.Now = func() time.Time { return now }
	return h
}

// An operator restarted mid-request closes the member's record as Interrupted and defragments it
// again (the request stays open until a success, as the operator reads it): the command reports
// both and succeeds once every member succeeded. CI saw it fail on the Interrupted record although
// the operator's retry succeeded a second later.
func TestDefragWaitsPastAnInterruption(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 12, 30, 0, time.UTC)
	h := defragHarness(t, now, func(i, n int) *stewardv1.DefragmentationResult {
		outcome := stewardv1.DefragmentationSucceeded
		if i == 1 && n < 3 {
			outcome = stewardv1.DefragmentationInterrupted // the first polls see the interrupted run
		}
		return &stewardv1.DefragmentationResult{Time: metav1.NewTime(now.Add(time.Duration(i+n) * time.Second)), Outcome: outcome,
			Trigger: stewardv1.DefragmentationRequested, DurationMilliseconds: 40}
	})
	if err := h.run(t, "defrag", "demo", "--timeout", "30s"); err != nil {
		t.Fatalf("%v\n%s", err, h.out.String())
	}
	if out := h.out.String(); !strings.Contains(out, "demo-1: Interrupted") || !strings.Contains(out, "demo-1: Succeeded") {
		t.Fatalf("want demo-1's interruption and its success reported:\n%s", out)
	}
}

// A member that keeps failing is not done: the command waits for the operator's retries and, at
// its timeout, says which member did not succeed and how it last ended.
func TestDefragTimesOutNamingTheFailure(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 12, 30, 0, time.UTC)
	h := defragHarness(t, now, func(i, _ int) *stewardv1.DefragmentationResult {
		outcome := stewardv1.DefragmentationSucceeded
		if i == 2 {
			outcome = stewardv1.DefragmentationFailed
		}
		return &stewardv1.DefragmentationResult{Time: metav1.NewTime(now.Add(time.Second)), Outcome: outcome,
			Trigger: stewardv1.DefragmentationRequested}
	})
	err := h.run(t, "defrag", "demo", "--timeout", "3s")
	if err == nil || !strings.Contains(err.Error(), "demo-2") || !strings.Contains(err.Error(), "Failed") {
		t.Fatalf("err %v, want the timeout naming demo-2's Failed\n%s", err, h.out.String())
	}
}
