//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
)

// lostAfter is the scenarios' spec.nodeLoss.replaceAfterSeconds: the shortest the API allows.
const lostAfter = 30

func replaceLostAfter(s int32) func(*stewardv1.EtcdCluster) {
	return func(ec *stewardv1.EtcdCluster) {
		ec.Spec.NodeLoss = &stewardv1.NodeLossSpec{ReplaceAfterSeconds: ptr.To(s)}
	}
}

// voters is a function for the disruption monitor: the voters status lists now, those in etcd's
// member list as leader or follower (a replacement takes a new ordinal, the removed member is no
// longer expected to serve, and a member not yet or no longer in etcd's list is no voter).
func voters(ns, name string) func() []string {
	return func() []string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ec, err := get(ctx, ns, name)
		if err != nil {
			return nil
		}
		var out []string
		for _, m := range ec.Status.Members {
			if m.Role == stewardv1.RoleLeader || m.Role == stewardv1.RoleFollower {
				out = append(out, m.Name)
			}
		}
		return out
	}
}

// waitReplacedElsewhere waits until the cluster has settled at 3 members again without member
// gone (and without its etcd member ID), and returns the replacement's name: the member that was
// not there when the wait began (call it before the member is removed).
func waitReplacedElsewhere(t *testing.T, ns, name, gone, goneID string, within time.Duration) string {
	t.Helper()
	var added string
	before := memberIDs(t, ns, name)
	f.WaitFor(t, ns, gone+" replaced under a new name", within, func(ctx context.Context) (bool, error) {
		ids := memberIDs(t, ns, name)
		added = ""
		if _, still := ids[gone]; still {
			return false, fmt.Errorf("%s is still a member: %v", gone, ids)
		}
		for m, id := range ids {
			if id == goneID {
				return false, fmt.Errorf("member ID %s is still in the cluster as %s", goneID, m)
			}
		}
		if ok, err := settled(ns, name, 3)(ctx); !ok {
			return false, err
		}
		for m := range ids {
			if _, was := before[m]; !was {
				added = m
			}
		}
		return added != "", fmt.Errorf("no new member in %v", ids)
	})
	return added
}

// TestNodeKilledMemberReplaced (issue 25, items 4 and 5): three members on three nodes in three
// zones, traffic on. The leader's node is stopped (its kubelet, containerd and containers killed,
// its network down): its zone is lost. Quorum holds; after spec.nodeLoss.replaceAfterSeconds of
// the node NotReady and etcd's new leader not hearing the member, the member is replaced under a
// new name in a surviving zone, never more than one voter unavailable, no acknowledged write
// lost. The node then comes back: the old Pod's etcd is a removed member and must not serve.
func TestNodeKilledMemberReplaced(t *testing.T) {
	t.Parallel()
	ns := f.Namespace(t)
	nodePool(t, ns, "zone-a", "zone-b", "zone-c")
	create(t, newCluster(ns, "db", 3, "", onPool(ns), replaceLostAfter(lostAfter)))
	waitSettled(t, ns, "db", 3, 4*time.Minute)
	w := watchRollOf(t, ns, "db", voters(ns, "db"))
	lead := leader(t, ns, "db")
	ids := memberIDs(t, ns, "db")
	onNode, inZone := memberPlacement(t, ns, "db")
	node, zone := onNode[lead], inZone[lead]
	t.Logf("stopping %s (zone %s), the node of the leader %s (%s)", node, zone, lead, ids[lead])

	w.changed = time.Now()
	nodeCtl(t, "stop", node)
	start := time.Now()
	added := waitReplacedElsewhere(t, ns, "db", lead, ids[lead], 5*time.Minute)
	measure(t, "node stopped to its member replaced and the cluster settled at 3/3", time.Since(start))
	onNode, inZone = memberPlacement(t, ns, "db")
	t.Logf("%s replaced by %s on %s (zone %s)", lead, added, onNode[added], inZone[added])
	if onNode[added] == node || inZone[added] == zone {
		t.Errorf("the replacement %s runs on %s in %s: the lost node or zone", added, onNode[added], inZone[added])
	}

	// The node comes back: the old member's etcd was removed and must not serve; its Pod must not
	// be in the client Service.
	nodeCtl(t, "start", node)
	f.WaitFor(t, ns, node+" Ready again", 2*time.Minute, func(ctx context.Context) (bool, error) {
		var n corev1.Node
		if err := f.Client.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
			return false, err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, fmt.Errorf("Ready %s", c.Status)
			}
		}
		return false, fmt.Errorf("no Ready condition")
	})
	f.WaitFor(t, ns, "the old member's Pod gone or not serving", 2*time.Minute, func(ctx context.Context) (bool, error) {
		var p corev1.Pod
		err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: lead}, &p)
		if err != nil {
			return client.IgnoreNotFound(err) == nil, err
		}
		return !podServes(&p), fmt.Errorf("%s: %s", lead, podSummary(&p))
	})
	time.Sleep(10 * time.Second) // long enough for a removed member to come up, if it could
	assertNotInClientService(t, ns, "db", lead)
	if _, still := memberIDs(t, ns, "db")[lead]; still {
		t.Errorf("%s came back as a member after its node returned", lead)
	}
	waitSettled(t, ns, "db", 3, time.Minute)
	w.finish("node stopped, member replaced", 1)
}

// TestVolumeOnDeletedNodeReplaced (issue 25, items 3 and 4): a member's node-local volume lives on
// a node the cloud deletes (machine, disk and Node object gone). The member can never run again
// where its volume was: it is replaced on another node under a new name, with no human.
func TestVolumeOnDeletedNodeReplaced(t *testing.T) {
	t.Parallel()
	ns := f.Namespace(t)
	nodePool(t, ns, "zone-a", "zone-b", "zone-c")
	create(t, newCluster(ns, "db", 3, "", onPool(ns), replaceLostAfter(lostAfter)))
	waitSettled(t, ns, "db", 3, 4*time.Minute)
	cl := clientFor(t, ns, "db")
	data := putData(t, cl, "/deleted-node/", 20)
	lead := leader(t, ns, "db")
	ids := memberIDs(t, ns, "db")
	onNode, _ := memberPlacement(t, ns, "db")
	var victim string
	for _, m := range slices.Sorted(maps.Keys(ids)) {
		if m != lead {
			victim = m
			break
		}
	}
	node := onNode[victim]
	t.Logf("deleting %s, the node of the follower %s and of its volume", node, victim)
	nodeCtl(t, "delete", node)
	start := time.Now()
	added := waitReplacedElsewhere(t, ns, "db", victim, ids[victim], 5*time.Minute)
	measure(t, "node deleted to its member replaced and the cluster settled at 3/3", time.Since(start))
	onNode, _ = memberPlacement(t, ns, "db")
	if onNode[added] == node {
		t.Errorf("the replacement %s is on the deleted node %s", added, node)
	}
	var pvc corev1.PersistentVolumeClaim
	if err := f.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: resources.PVCName(added)}, &pvc); err != nil {
		t.Errorf("the replacement's PVC: %v", err)
	}
	checkData(t, clientFor(t, ns, "db"), "/deleted-node/", data)
}

// podServes: the Pod is running, not terminating, and Ready.
func podServes(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podSummary(p *corev1.Pod) string {
	return fmt.Sprintf("phase %s, deleting %v, ready %v, node %s", p.Status.Phase, p.DeletionTimestamp != nil, podServes(p), p.Spec.NodeName)
}

// assertNotInClientService fails when member's Pod is a ready endpoint of the client Service (an
// EndpointSlice also lists terminating Pods, not ready, for graceful termination).
func assertNotInClientService(t *testing.T, ns, name, member string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := f.Kubectl(ctx, "-n", ns, "get", "endpointslices", "-l", "kubernetes.io/service-name="+resources.ClientServiceName(name),
		"-o", "jsonpath={range .items[*].endpoints[?(@.conditions.ready==true)]}{.targetRef.name} {end}")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("client Service endpoints: %s", out)
	if slices.Contains(strings.Fields(out), member) {
		t.Errorf("%s is an endpoint of the client Service", member)
	}
}
