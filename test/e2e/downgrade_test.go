//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/failpoint"
	"github.com/etcd-steward/steward/test/e2e/framework"
)

// TestDowngrade (issue 28): one minor at a time through etcd's downgrade protocol, under traffic.
func TestDowngrade(t *testing.T) {
	t.Parallel()
	v35, v36, v37 := versionOf(t, "3.5"), versionOf(t, "3.6"), versionOf(t, "3.7")

	// 3.7 → 3.6 → 3.5 with a kube-apiserver storing in the cluster throughout, the operator killed
	// right after etcd enabled the first downgrade (before status said so). Two minors at once is
	// refused at admission.
	t.Run("3.7-to-3.6", func(t *testing.T) {
		t.Parallel()
		ns := settledCluster(t, "down", 3, "", func(ec *stewardv1.EtcdCluster) { ec.Spec.Version = v37 })
		err := tryUpdate(ns, "down", func(ec *stewardv1.EtcdCluster) { ec.Spec.Version = v35 })
		if err == nil || !strings.Contains(err.Error(), "one minor version at a time") {
			t.Errorf("%s -> %s was not refused at admission: %v", v37, v35, err)
		}
		proxy := framework.StartTCPProxy(t, clientServiceAddr(t, ns, "down"))
		kas := framework.StartKubeAPIServer(t, f.KubeAPIServer, t.TempDir(), "https://"+proxy.Addr, "/kas-down", appFiles(t, ns, "down"))
		load := startAPILoad(t, kas, "down")
		data := putData(t, clientFor(t, ns, "down"), "/down/", 30)
		start := time.Now()
		handoffs := len(eventsWith(t, ns, "down", "MoveLeader"))
		w := watchRoll(t, ns, "down", 3)
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		hit, err := stopAtFailpoint(ctx, ns, "down", failpoint.AfterDowngradeEnable, 3*time.Minute, func() {
			w.change(func(ec *stewardv1.EtcdCluster) { ec.Spec.Version = v36 })
		})
		cancel()
		if err != nil || !hit {
			t.Fatalf("the operator did not stop after enabling the downgrade (hit %v): %v", hit, err)
		}
		d := waitDowngrade(t, ns, "down", v36, stewardv1.DowngradeCompleted, 10*time.Minute)
		w.finish(fmt.Sprintf("downgrade %s -> %s", v37, v36), 1)
		t.Logf("MEASURE downgrade %s -> %s: %.1fs from the edit to Completed (%s)", v37, v36,
			d.FinishedAt.Sub(w.changed).Seconds(), d.Message)
		if d.From != v37 {
			t.Errorf("status.downgrade.from %q, want %q", d.From, v37)
		}
		// One handoff, before the leader rolls last; none when an election (a loaded machine)
		// already put leadership on a rolled member. Two would be a leader rolled twice over.
		switch n := len(eventsWith(t, ns, "down", "MoveLeader")) - handoffs; {
		case n > 1:
			t.Errorf("%d leader handoffs in the downgrade to %s, want 1 (the leader last)", n, v36)
		case n == 0:
			t.Logf("no MoveLeader in the downgrade to %s: leaders %v (an election moved it first)", v36, w.leaders)
		}
		membersRun(t, ns, "down", v36)
		h := load.stop()
		logAPILoad(t, "downgrade 3.7 -> 3.6, kube-apiserver", h, start)
		if failed := h.Lockouts(); len(failed) > 0 {
			t.Errorf("%d kube-apiserver requests failed through the downgrade: %s", len(failed), firstOps(failed))
		}
		checkObjectsKept(t, kas, h)
		checkData(t, clientFor(t, ns, "down"), "/down/", data)

		// 3.6 → 3.5 on the same cluster: a new traffic run (keys of its own) and the kube-apiserver
		// storing throughout, through the mixed 3.5/3.6 cluster.
		load = startAPILoad(t, kas, "down35")
		start = time.Now()
		handoffs = len(eventsWith(t, ns, "down", "MoveLeader"))
		w = watchRoll(t, ns, "down", 3)
		w.change(func(ec *stewardv1.EtcdCluster) { ec.Spec.Version = v35 })
		d = waitDowngrade(t, ns, "down", v35, stewardv1.DowngradeCompleted, 10*time.Minute)
		w.finish(fmt.Sprintf("downgrade %s -> %s", v36, v35), 1)
		t.Logf("MEASURE downgrade %s -> %s: %.1fs from the edit to Completed (%s)", v36, v35,
			d.FinishedAt.Sub(w.changed).Seconds(), d.Message)
		if n := len(eventsWith(t, ns, "down", "MoveLeader")) - handoffs; n > 1 {
			t.Errorf("%d leader handoffs in the downgrade to %s, want 1 (the leader last)", n, v35)
		}
		membersRun(t, ns, "down", v35)
		h = load.stop()
		logAPILoad(t, "downgrade 3.6 -> 3.5, kube-apiserver", h, start)
		if failed := h.Lockouts(); len(failed) > 0 {
			t.Errorf("%d kube-apiserver requests failed through the downgrade: %s", len(failed), firstOps(failed))
		}
		checkObjectsKept(t, kas, h)
		checkData(t, clientFor(t, ns, "down"), "/down/", data)
	})

	// Edited back up once the first member runs 3.6: etcd's downgrade is cancelled and that member
	// rolls forward again. A backup is taken before etcd's downgrade is enabled, into the
	// destination of the cluster's schedule, and named in status.
	t.Run("cancelled-midway", func(t *testing.T) {
		t.Parallel()
		ns := settledCluster(t, "back", 3, "", func(ec *stewardv1.EtcdCluster) { ec.Spec.Version = v37 })
		dest, _ := s3Storage(t, ns)
		createObj(t, &stewardv1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "yearly"},
			Spec: stewardv1.EtcdBackupScheduleSpec{Schedule: "0 0 1 1 *",
				Template: stewardv1.EtcdBackupSpec{ClusterName: "back", Destination: dest}}})
		data := putData(t, clientFor(t, ns, "back"), "/back/", 30)
		w := watchRoll(t, ns, "back", 3)
		w.change(func(ec *stewardv1.EtcdCluster) { ec.Spec.Version = v36 })
		waitDisrupted(t, ns, "back", 1)
		update(t, ns, "back", func(ec *stewardv1.EtcdCluster) { ec.Spec.Version = v37 })
		d := waitDowngrade(t, ns, "back", v36, stewardv1.DowngradeCancelled, 10*time.Minute)
		w.finish(fmt.Sprintf("downgrade %s -> %s cancelled midway", v37, v36), 1)
		t.Logf("MEASURE downgrade cancelled midway: %.1fs from the first edit to Cancelled", d.FinishedAt.Sub(w.changed).Seconds())
		membersRun(t, ns, "back", v37)
		if d.Backup == "" {
			t.Error("status.downgrade.backup is empty although a schedule backs the cluster up")
		} else if b := backupDone(t, ns, d.Backup, time.Minute); b.Status.Phase != stewardv1.BackupSucceeded {
			t.Errorf("the backup taken before the downgrade %s: %s %s", d.Backup, b.Status.Phase, b.Status.Message)
		}
		checkData(t, clientFor(t, ns, "back"), "/back/", data)
	})
}

// waitDowngrade waits for status.downgrade to reach stage for target, and the cluster to settle.
func waitDowngrade(t *testing.T, ns, name, target string, stage stewardv1.DowngradeStage, timeout time.Duration) *stewardv1.DowngradeStatus {
	t.Helper()
	var d *stewardv1.DowngradeStatus
	f.WaitFor(t, ns, fmt.Sprintf("downgrade to %s %s", target, stage), timeout, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, name)
		if err != nil {
			return false, err
		}
		if d = ec.Status.Downgrade; d == nil || d.Target != target || d.Stage != stage {
			return false, fmt.Errorf("status.downgrade %+v; %s", d, condition(ec, "Progressing"))
		}
		return settled(ns, name, 3)(ctx)
	})
	return d
}

// membersRun checks every member reports version.
func membersRun(t *testing.T, ns, name, version string) {
	t.Helper()
	ec, err := get(context.Background(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ec.Status.Members {
		if m.Version != version {
			t.Errorf("member %s reports %s, want %s", m.Name, m.Version, version)
		}
	}
}

// checkObjectsKept reads back, through the kube-apiserver, every ConfigMap it acknowledged creating.
func checkObjectsKept(t *testing.T, kas *framework.KubeAPIServer, h framework.History) {
	t.Helper()
	cs, err := kas.Clientset(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := cs.CoreV1().ConfigMaps("e2e").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, c := range list.Items {
		have[c.Name] = true
	}
	created, lost := 0, 0
	for _, op := range h {
		if op.Kind != framework.OpPut || op.Err != "" {
			continue
		}
		created++
		if !have[op.Key] {
			lost++
		}
	}
	t.Logf("MEASURE kube-apiserver objects: %d created and acknowledged, %d lost", created, lost)
	if lost > 0 {
		t.Errorf("%d ConfigMaps the kube-apiserver acknowledged are gone", lost)
	}
}

// TestUpgradeGuard (issue 28): a cluster on a 3.6 patch below the 3.6.11 etcd's upgrade guide asks
// for before 3.7 is not rolled onto 3.7: status names the patch to go to first, and no member is
// touched. Following the path (the newer 3.6 patch, then 3.7) works.
func TestUpgradeGuard(t *testing.T) {
	t.Parallel()
	old, v36, v37 := olderPatchOf(t, "3.6"), versionOf(t, "3.6"), versionOf(t, "3.7")
	ns := settledCluster(t, "guard", 3, "", func(ec *stewardv1.EtcdCluster) { ec.Spec.Version = old })
	before := uids(t, ns, "guard")
	update(t, ns, "guard", func(ec *stewardv1.EtcdCluster) { ec.Spec.Version = v37 })
	want := "set spec.version to 3.6.11 (or a later 3.6) first, then " + v37
	f.WaitFor(t, ns, "the upgrade refused with the path", 2*time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, "guard")
		if err != nil {
			return false, err
		}
		for _, c := range ec.Status.Conditions {
			if strings.Contains(c.Message, want) {
				return ec.Status.Observed != nil && ec.Status.Observed.Version == old, nil
			}
		}
		return false, fmt.Errorf("conditions %+v", ec.Status.Conditions)
	})
	time.Sleep(10 * time.Second) // it stays refused: nothing rolls meanwhile
	assertPodsUntouched(t, ns, "guard", before, "an upgrade refused by its guard")
	update(t, ns, "guard", func(ec *stewardv1.EtcdCluster) { ec.Spec.Version = v36 })
	waitSettled(t, ns, "guard", 3, 5*time.Minute)
	update(t, ns, "guard", func(ec *stewardv1.EtcdCluster) { ec.Spec.Version = v37 })
	waitSettled(t, ns, "guard", 3, 6*time.Minute)
	membersRun(t, ns, "guard", v37)
}

// olderPatchOf is a built version of minor other than versionOf's (an older patch built for one
// test), skipping the test if none was built.
func olderPatchOf(t *testing.T, minor string) string {
	for _, v := range f.EtcdVersions {
		if v = strings.TrimPrefix(v, "v"); strings.HasPrefix(v, minor+".") && v != versionOf(t, minor) {
			return v
		}
	}
	t.Skipf("no second etcd %s patch was built (STEWARD_E2E_ETCD_VERSIONS=%v)", minor, f.EtcdVersions)
	return ""
}

// TestUpgradeRefusesCustomV2Content (issue 28): etcd 3.6 refuses data with keys written through
// the v2 API (etcd's upgrade guide: `etcdutl check v2store` before 3.6). A 3.5 cluster that ran
// with --enable-v2 and holds a v2 key is asked for 3.6 without the flag: the first member's data
// check runs etcd's v2 store check on its data before 3.6 starts, refuses (VersionRefused: the
// data is kept, the member is not replaced), status says why, and nothing else rolls. Setting 3.5
// back brings the member back on its data.
func TestUpgradeRefusesCustomV2Content(t *testing.T) {
	t.Parallel()
	v35, v36 := versionOf(t, "3.5"), versionOf(t, "3.6")
	ns := settledCluster(t, "v2", 3, "", func(ec *stewardv1.EtcdCluster) {
		ec.Spec.Version = v35
		ec.Spec.TLS = &stewardv1.TLSSpec{Enabled: ptr.To(false)}
		ec.Spec.Options.ExtraArgs = map[string]string{"enable-v2": "true"}
	})
	putV2Key(t, "http://"+clientServiceAddr(t, ns, "v2")+"/v2/keys/app/config")
	data := putData(t, clientFor(t, ns, "v2"), "/v2e/", 20)
	w := watchRoll(t, ns, "v2", 3)
	w.change(func(ec *stewardv1.EtcdCluster) {
		ec.Spec.Version = v36
		ec.Spec.Options.ExtraArgs = nil // 3.6 has no --enable-v2 (the planner refuses it: TestVersionGuards)
	})
	var refused string
	f.WaitFor(t, ns, "a member's data check refusing etcd 3.6 on custom v2 content", 4*time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, "v2")
		if err != nil {
			return false, err
		}
		for _, c := range ec.Status.Conditions {
			if strings.Contains(c.Message, "custom v2 content") {
				refused = c.Message
				return true, nil
			}
		}
		return false, fmt.Errorf("conditions %+v", ec.Status.Conditions)
	})
	t.Logf("refused: %s", refused)
	time.Sleep(10 * time.Second) // the roll stays held: one member down at most
	ec, _ := get(context.Background(), ns, "v2")
	on35 := 0
	for _, m := range ec.Status.Members {
		if m.Version == v35 {
			on35++
		}
	}
	if on35 < 2 {
		t.Errorf("%d members still on %s after the refusal, want 2: the roll went on", on35, v35)
	}
	update(t, ns, "v2", func(ec *stewardv1.EtcdCluster) { ec.Spec.Version = v35 })
	waitSettled(t, ns, "v2", 3, 5*time.Minute)
	w.finish("upgrade refused on custom v2 content, then set back", 1)
	membersRun(t, ns, "v2", v35)
	if n := len(eventsWith(t, ns, "v2", "RemoveMember")); n > 0 {
		t.Errorf("%d members removed: a refused member keeps its data and its place", n)
	}
	checkData(t, clientFor(t, ns, "v2"), "/v2e/", data)
}

// putV2Key writes a key through etcd 3.5's v2 HTTP API (--enable-v2).
func putV2Key(t *testing.T, url string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, url, strings.NewReader("value=written-through-v2"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("PUT %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("PUT %s: %s", url, resp.Status)
	}
}
