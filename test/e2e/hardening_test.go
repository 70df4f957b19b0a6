//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/test/e2e/framework"
)

// Issue 10: faults the first scenarios did not model. Each test runs in its own namespace.

// follower picks a member that does not lead.
func follower(t *testing.T, ns, name string) string {
	t.Helper()
	if leader(t, ns, name) == name+"-2" {
		return name + "-1"
	}
	return name + "-2"
}

// TestRepairFailedPod puts a PVC member's Pod into phase Failed, as a node-pressure eviction
// does. The Pod never runs again by itself; Steward deletes it and recreates it on the same PVC:
// same member ID, data intact, nothing else disrupted.
func TestRepairFailedPod(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "db", 3, "")
	cl := clientFor(t, ns, "db")
	data := putData(t, cl, "/failed/", 20)
	victim := follower(t, ns, "db")
	before := memberIDs(t, ns, "db")[victim]
	old := memberPods(t, ns, "db")[victim]
	m := monitor(t, ns, "db", func() []string { return memberNames("db", 3) })

	start := time.Now()
	// A real eviction is the kubelet's own word; this one is written over it. The kubelet's status
	// sync can write its cached Running back before its Pod worker saw the Failed phase (seen in CI:
	// the Pod ran on for 3 minutes), so the phase is written again whenever it was turned back.
	patch := []byte(`{"status":{"phase":"Failed","reason":"Evicted","message":"e2e: the node was low on resource: memory"}}`)
	evict := func(ctx context.Context, p *corev1.Pod) {
		if err := f.Client.Status().Patch(ctx, p, client.RawPatch("application/merge-patch+json", patch)); err != nil {
			t.Fatalf("marking %s Failed: %v", victim, err)
		}
	}
	evict(context.Background(), old)
	reverted := 0
	f.WaitFor(t, ns, "a new Pod for "+victim, 3*time.Minute, func(ctx context.Context) (bool, error) {
		p := memberPods(t, ns, "db")[victim]
		if p != nil && p.UID == old.UID && p.Status.Phase != corev1.PodFailed && p.DeletionTimestamp == nil {
			reverted++
			t.Logf("the kubelet set %s's phase back to %s; marking it Failed again", victim, p.Status.Phase)
			evict(ctx, p)
		}
		if p == nil || p.UID == old.UID {
			return false, fmt.Errorf("%s not recreated yet (the kubelet turned the phase back %d times)", victim, reverted)
		}
		return framework.PodReady(p), fmt.Errorf("%s recreated, not ready", victim)
	})
	waitSettled(t, ns, "db", 3, 3*time.Minute)
	measure(t, "repair a Failed (evicted) PVC member Pod", time.Since(start))
	if after := memberIDs(t, ns, "db")[victim]; after != before {
		t.Errorf("%s was replaced (%s -> %s); a Failed PVC Pod keeps its member", victim, before, after)
	}
	checkData(t, cl, "/failed/", data)
	assertMaxUnavailable(t, m, 1)
}

// TestRemovalInterruptedHeals: a scale-down's removal is under way (its EtcdMember deleted, still
// in etcd) when the operator is killed and another member's Pod is deleted. The restarted operator
// must recreate the lost Pod first and then finish the removal; before issue 10 the removal waited
// for a healthy cluster and the repair that would heal it never ran.
func TestRemovalInterruptedHeals(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "db", 3, "")
	cl := clientFor(t, ns, "db")
	data := putData(t, cl, "/interrupted/", 20)
	ids := memberIDs(t, ns, "db")
	ctx := context.Background()

	// Pause so the operator takes no step while the scene is set; a paused cluster is not touched.
	update(t, ns, "db", func(ec *stewardv1.EtcdCluster) { ec.Spec.Paused = true })
	f.WaitFor(t, ns, "paused", time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, "db")
		return err == nil && ec.Status.ObservedGeneration == ec.Generation, err
	})
	survivor := "db-0"
	if leader(t, ns, "db") == survivor {
		survivor = "db-1"
	}
	// The scale-down's intent, as the operator writes it: spec.replicas 2, and db-2's EtcdMember
	// deleted (its finalizer holds it until it left etcd).
	update(t, ns, "db", func(ec *stewardv1.EtcdCluster) { ec.Spec.Replicas = ptr.To[int32](2) })
	var gone stewardv1.EtcdMember
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-2"}, &gone); err != nil {
		t.Fatal(err)
	}
	if err := f.Client.Delete(ctx, &gone); err != nil {
		t.Fatal(err)
	}
	if err := f.Client.Delete(ctx, memberPods(t, ns, "db")[survivor], client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	killOperator(t)
	start := time.Now()
	update(t, ns, "db", func(ec *stewardv1.EtcdCluster) { ec.Spec.Paused = false })
	waitSettled(t, ns, "db", 2, 5*time.Minute)
	measure(t, "heal a removal interrupted by an operator kill and a lost Pod", time.Since(start))
	after := memberIDs(t, ns, "db")
	for _, n := range []string{"db-0", "db-1"} {
		if after[n] != ids[n] {
			t.Errorf("%s was replaced (%s -> %s): the lost Pod had a PVC and should have come back", n, ids[n], after[n])
		}
	}
	if _, still := after["db-2"]; still {
		t.Errorf("db-2 is still a member: %v", after)
	}
	checkData(t, cl, "/interrupted/", data)
}

// TestOldRestartsKeepData: a PVC member gathers six restarts (its etcd killed again and again, each
// time coming back), then goes unready for a while without crashing (its process frozen, as a disk
// stall does). Before issue 10 more than five lifetime restarts and an unready Pod were enough to
// remove it and wipe its PVC; now it keeps its member ID and its data.
func TestOldRestartsKeepData(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "db", 3, "")
	cl := clientFor(t, ns, "db")
	data := putData(t, cl, "/restarts/", 20)
	victim := follower(t, ns, "db")
	before := memberIDs(t, ns, "db")[victim]
	start := time.Now()
	for i := int32(1); i <= 6; i++ {
		killEtcd(t, ns, victim)
		f.WaitFor(t, ns, fmt.Sprintf("%s restarted %d times and ready", victim, i), 5*time.Minute,
			func(ctx context.Context) (bool, error) {
				p := memberPods(t, ns, "db")[victim]
				if p == nil {
					return false, fmt.Errorf("%s's Pod is gone: it was deleted", victim)
				}
				return restarts(p) >= i && framework.PodReady(p), fmt.Errorf("%d restarts", restarts(p))
			})
	}
	measure(t, "six etcd kills of one member, each back", time.Since(start))
	// Frozen for 15 s: readiness fails after 3 s, liveness would restart it only after 38 s (8
	// failures 5 s apart). A restart then would come after the kubelet's back-off (40 s on localkube): the
	// freeze is kept well clear of it, and a restart is reported as such, not as a slow settle.
	freezeEtcd(t, ns, victim, 15*time.Second, func() {
		f.WaitFor(t, ns, victim+" unready while frozen", 15*time.Second, func(ctx context.Context) (bool, error) {
			p := memberPods(t, ns, "db")[victim]
			return p != nil && !framework.PodReady(p), fmt.Errorf("%s still ready", victim)
		})
	})
	if p := memberPods(t, ns, "db")[victim]; p != nil && restarts(p) != 6 {
		t.Fatalf("%s restarted while frozen for 15 s (the liveness probe must allow longer): %s", victim, podState(p))
	}
	waitSettled(t, ns, "db", 3, 3*time.Minute)
	if after := memberIDs(t, ns, "db")[victim]; after != before {
		t.Fatalf("%s was replaced (%s -> %s) for old restarts while etcd still had its data", victim, before, after)
	}
	if p := memberPods(t, ns, "db")[victim]; p == nil || restarts(p) != 6 {
		t.Errorf("%s's Pod was recreated or restarted again: %+v", victim, p)
	}
	checkData(t, cl, "/restarts/", data)
}

// freezeEtcd stops a member's etcd process with SIGSTOP for d (signals to a container's PID 1 from
// inside are ignored, so the test, root on the node, signals the host process), runs during() while
// it is frozen, then lets it go on.
func freezeEtcd(t *testing.T, ns, member string, d time.Duration, during func()) {
	t.Helper()
	pid := hostPID(t, "--name="+member, "."+ns+".svc")
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %d: %v", pid, err)
	}
	// Thawed on a timer too: a during() slowed by the API server must not stretch the freeze (a
	// second SIGCONT is harmless). A failing during() thaws at once.
	defer func() { _ = syscall.Kill(pid, syscall.SIGCONT) }()
	thaw := time.Now().Add(d)
	defer time.AfterFunc(d, func() { _ = syscall.Kill(pid, syscall.SIGCONT) }).Stop()
	during()
	time.Sleep(time.Until(thaw))
}

// hostPID finds the host process whose command line holds every given fragment.
func hostPID(t *testing.T, fragments ...string) int {
	t.Helper()
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		// Not the wrapper that runs etcd as its child (`steward-member run-etcd … -- etcd …`, or
		// `steward member run-etcd` in a Pod built before the member binary existed).
		if !strings.Contains(cmd, "etcd") || strings.Contains(cmd, " run-etcd ") {
			continue
		}
		all := true
		for _, fr := range fragments {
			all = all && strings.Contains(cmd, fr)
		}
		if all {
			return pid
		}
	}
	t.Fatalf("no host process with %v", fragments)
	return 0
}

// killEtcd kills the etcd process of a member's container; the kubelet restarts it (with back-off).
func killEtcd(t *testing.T, ns, member string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := f.Kubectl(ctx, "-n", ns, "exec", member, "-c", "etcd", "--", "sh", "-c", "kill 1")
	if err != nil && !strings.Contains(err.Error(), "exit code 137") && !strings.Contains(err.Error(), "terminated") {
		t.Logf("exec kill (may end with the process): %v %s", err, out)
	}
}
