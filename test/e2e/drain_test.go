//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// drain runs `kubectl drain` on node as an administrator or a managed node pool would, and returns
// how long it took. Only the test's own Pods run on its pool's nodes.
func drain(t *testing.T, node string) time.Duration {
	t.Helper()
	// The operator must be up for the whole drain: its eviction webhook is what holds each eviction
	// until leadership is handed over and the member prepared.
	defer holdOperator(t)()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := f.Kubectl(ctx, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout", "5m")
	if err != nil {
		t.Fatalf("kubectl drain %s: %v\n%s", node, err, out)
	}
	return time.Since(start)
}

func uncordon(t *testing.T, node string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := f.Kubectl(ctx, "uncordon", node); err != nil {
		t.Fatalf("kubectl uncordon %s: %v\n%s", node, err, out)
	}
}

// TestManagedNodeUpgrade (issue 25, item 3): what a managed node-pool upgrade does, node by node:
// add a new node in the old one's zone, drain the old one, delete it. Node-local volumes cannot
// follow, so each drained member is replaced on the new node (three replacements), traffic on:
// never more than one voter unavailable, no acknowledged write lost.
func TestManagedNodeUpgrade(t *testing.T) {
	t.Parallel()
	ns := f.Namespace(t)
	old := nodePool(t, ns, "zone-a", "zone-b", "zone-c")
	create(t, newCluster(ns, "db", 3, "", onPool(ns), replaceLostAfter(lostAfter)))
	waitSettled(t, ns, "db", 3, 4*time.Minute)
	w := watchRollOf(t, ns, "db", voters(ns, "db"))
	w.changed = time.Now()
	start := time.Now()
	for i, node := range old {
		step := time.Now()
		fresh := addToPool(t, ns, []string{"zone-a", "zone-b", "zone-c"}[i])
		onNode, _ := memberPlacement(t, ns, "db")
		var member string
		for m, n := range onNode {
			if n == node {
				member = m
			}
		}
		if member == "" {
			t.Fatalf("no member on %s: %v", node, onNode)
		}
		id := memberIDs(t, ns, "db")[member]
		took := drain(t, node)
		t.Logf("drained %s (member %s) in %.1fs", node, member, took.Seconds())
		nodeCtl(t, "delete", node)
		added := waitReplacedElsewhere(t, ns, "db", member, id, 5*time.Minute)
		onNode, _ = memberPlacement(t, ns, "db")
		t.Logf("%s replaced by %s on %s", member, added, onNode[added])
		if onNode[added] != fresh {
			t.Errorf("the replacement %s runs on %s, not on the new node %s", added, onNode[added], fresh)
		}
		measure(t, fmt.Sprintf("managed upgrade, node %d of 3 (add, drain %.1fs, delete, replaced)", i+1, took.Seconds()), time.Since(step))
	}
	measure(t, "managed upgrade of 3 nodes with node-local volumes", time.Since(start))
	w.finish("managed node upgrade", 1)
}

// TestDrainWithoutReplacement (issue 25, item 3): drains that must not replace anything. A member
// whose volume follows the Pod (StorageClass network) is moved to another node by a drain and keeps
// its etcd member ID and its PVC; a member on a node-local volume whose node is uncordoned after
// the drain (a kernel patch, not an upgrade) comes back on it, also with its ID and PVC.
func TestDrainWithoutReplacement(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, class string
		uncordon    bool
	}{
		{name: "network", class: "network"},
		{name: "local", class: "standard", uncordon: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := f.Namespace(t)
			nodePool(t, ns, "zone-a", "zone-b", "zone-c")
			create(t, newCluster(ns, "db", 3, "", onPool(ns), func(ec *stewardv1.EtcdCluster) {
				ec.Spec.Storage.StorageClassName = ptr.To(tc.class)
			}))
			waitSettled(t, ns, "db", 3, 4*time.Minute)
			w := watchRoll(t, ns, "db", 3)
			ids, pvcs := memberIDs(t, ns, "db"), pvcUIDs(t, ns, "db")
			lead := leader(t, ns, "db")
			onNode, _ := memberPlacement(t, ns, "db")
			node := onNode[lead]
			w.changed = time.Now()
			took := drain(t, node)
			measure(t, fmt.Sprintf("kubectl drain of the leader's node (%s volume)", tc.name), took)
			if tc.uncordon {
				time.Sleep(10 * time.Second) // a short maintenance
				uncordon(t, node)
			} else {
				// The status can still say settled on the drained node for a moment (CI: the operator,
				// restarted by another scenario 4 s before the drain, had not reconciled the eviction
				// yet): wait for it to show the member moved, then for the cluster to settle.
				f.WaitFor(t, ns, lead+" off the drained node "+node, 3*time.Minute, func(ctx context.Context) (bool, error) {
					ec, err := get(ctx, ns, "db")
					if err != nil {
						return false, err
					}
					for _, m := range ec.Status.Members {
						if m.Name == lead {
							return m.Node != "" && m.Node != node, fmt.Errorf("%s on %q", lead, m.Node)
						}
					}
					return false, fmt.Errorf("%s not in the status", lead)
				})
			}
			waitSettled(t, ns, "db", 3, 4*time.Minute)
			measure(t, fmt.Sprintf("drain (%s volume) to settled", tc.name), time.Since(w.changed))
			if after := memberIDs(t, ns, "db"); fmt.Sprint(after) != fmt.Sprint(ids) {
				t.Errorf("member IDs changed %v -> %v: a drain replaced a member", ids, after)
			}
			if after := pvcUIDs(t, ns, "db"); fmt.Sprint(after) != fmt.Sprint(pvcs) {
				t.Errorf("PVCs changed %v -> %v", pvcs, after)
			}
			onNodeAfter, _ := memberPlacement(t, ns, "db")
			t.Logf("placement before %v, after %v", onNode, onNodeAfter)
			if !tc.uncordon && onNodeAfter[lead] == node {
				t.Errorf("%s is still on the drained node %s", lead, node)
			}
			moves := eventsWith(t, ns, "db", "MoveLeader")
			switch restarted := operatorRestartedSince(t, w.changed); {
			case slices.ContainsFunc(moves, func(m string) bool { return len(m) > 0 }):
			case restarted != "":
				// Scenarios beside this one kill the operator; while it is down the eviction
				// webhook is not there to hold the eviction (failurePolicy Ignore), by design.
				t.Logf("no MoveLeader event, and the operator was restarted during the drain (%s): handover not asserted", restarted)
			default:
				t.Errorf("no MoveLeader event: the drained leader was evicted without handing over")
			}
			w.finish("drain of the leader's node ("+tc.name+")", 1)
		})
	}
}

// operatorRestartedSince names an operator Pod created after since ("" when none was): another
// scenario killed the operator meanwhile.
func operatorRestartedSince(t *testing.T, since time.Time) string {
	t.Helper()
	var pods corev1.PodList
	if err := f.Client.List(context.Background(), &pods, client.InNamespace(f.OperatorNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.CreationTimestamp.After(since) {
			return fmt.Sprintf("%s created %s", p.Name, p.CreationTimestamp.Format("15:04:05"))
		}
	}
	return ""
}

// TestDrainMemoryAddFirst (issue 30): a drained memory member is a planned move of a healthy member,
// so it is replaced add-first: its successor joins on a node still schedulable and votes, then
// Steward removes the drained member and deletes its Pod, which ends kubectl drain's eviction. The
// cluster keeps its 3 voters throughout (remove-first would drop to 2 while the successor catches up).
func TestDrainMemoryAddFirst(t *testing.T) {
	t.Parallel()
	ns := f.Namespace(t)
	nodePool(t, ns, "zone-a", "zone-b", "zone-c")
	create(t, newCluster(ns, "db", 3, stewardv1.StorageMediumMemory, onPool(ns)))
	waitSettled(t, ns, "db", 3, 4*time.Minute)
	w := watchRollFor(t, ns, "db", 3, stewardv1.StorageMediumMemory)
	lead := leader(t, ns, "db")
	onNode, _ := memberPlacement(t, ns, "db")
	node := onNode[lead]
	w.changed = time.Now()
	took := drain(t, node)
	measure(t, "kubectl drain of the leader's node (memory, add-first)", took)
	waitSettled(t, ns, "db", 3, 4*time.Minute)
	measure(t, "drain (memory, add-first) to settled", time.Since(w.changed))
	after, _ := memberPlacement(t, ns, "db")
	t.Logf("placement before %v, after %v", onNode, after)
	if _, ok := after[lead]; ok {
		t.Errorf("%s is still a member after its node was drained: want it replaced", lead)
	}
	for m, n := range after {
		if n == node {
			t.Errorf("%s runs on the drained node %s", m, node)
		}
	}
	steps := append(eventsWith(t, ns, "db", "CreateMember"), eventsWith(t, ns, "db", "DeleteMember")...)
	t.Logf("CreateMember and DeleteMember events: %q", steps)
	if !slices.ContainsFunc(steps, func(m string) bool { return strings.Contains(m, "add-first for its eviction: creating") }) ||
		!slices.ContainsFunc(steps, func(m string) bool { return strings.Contains(m, "its successor votes; removing it") }) {
		if restarted := operatorRestartedSince(t, w.changed); restarted != "" {
			t.Skipf("the operator was restarted during the drain (%s): its webhook was not there to hold the eviction", restarted)
		}
		t.Errorf("no add-first replacement recorded for the drained %s: %q", lead, steps)
	}
	w.finish("drain of the leader's node (memory, add-first)", 1)
}
