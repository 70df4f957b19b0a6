//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/plan"
)

// poolKey is the label and NoSchedule taint hack/localkube/node.sh puts on a node added to a pool.
const poolKey = "localkube.steward.dev/pool"

// nodeCtl runs hack/localkube/node.sh: the local cluster's stand-in for a cloud provider and its
// failures. It returns the command's standard output.
func nodeCtl(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "../../hack/localkube/node.sh", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node.sh %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	t.Logf("node.sh %s: %s", strings.Join(args, " "), strings.TrimSpace(stderr.String()))
	return strings.TrimSpace(string(out))
}

// nodePool adds one node per zone to a pool of the test's own (named after its namespace): only
// Pods tolerating the pool run there, so the test can stop, cut or delete these nodes while other
// tests run beside it. The nodes are deleted when the test ends.
func nodePool(t *testing.T, pool string, zones ...string) []string {
	t.Helper()
	var nodes []string
	for _, z := range zones {
		n := nodeCtl(t, "add", z, pool)
		nodes = append(nodes, n)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// A test that deleted its node (a cloud losing it) leaves nothing to delete.
			if out, err := exec.CommandContext(ctx, "../../hack/localkube/node.sh", "delete", n).CombinedOutput(); err != nil &&
				!strings.Contains(string(out), "no node '"+n+"'") {
				t.Logf("deleting node %s: %v: %s", n, err, out)
			}
		})
	}
	return nodes
}

// addToPool adds one more node to a test's pool (a cloud adding a node): its name.
func addToPool(t *testing.T, pool, zone string) string {
	t.Helper()
	return nodePool(t, pool, zone)[0]
}

// onPool makes the cluster's members run on the pool's nodes only.
func onPool(pool string) func(*stewardv1.EtcdCluster) {
	return func(ec *stewardv1.EtcdCluster) {
		t := &ec.Spec.MemberTemplate
		t.NodeSelector = map[string]string{poolKey: pool}
		t.Tolerations = append(t.Tolerations, corev1.Toleration{Key: poolKey, Operator: corev1.TolerationOpEqual,
			Value: pool, Effect: corev1.TaintEffectNoSchedule})
	}
}

// memberPlacement maps each member to the node and zone status reports for it.
func memberPlacement(t *testing.T, ns, name string) (nodes, zones map[string]string) {
	t.Helper()
	ec, err := get(context.Background(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	nodes, zones = map[string]string{}, map[string]string{}
	for _, m := range ec.Status.Members {
		nodes[m.Name], zones[m.Name] = m.Node, m.Zone
	}
	return nodes, zones
}

// placementCondition is the cluster's PlacementAtRisk condition as "Status/Reason".
func placementCondition(ctx context.Context, ns, name string) (string, error) {
	ec, err := get(ctx, ns, name)
	if err != nil {
		return "", err
	}
	c := apimeta.FindStatusCondition(ec.Status.Conditions, plan.ConditionPlacementAtRisk)
	if c == nil || c.ObservedGeneration != ec.Generation && c.ObservedGeneration != 0 {
		return "", fmt.Errorf("no current %s condition", plan.ConditionPlacementAtRisk)
	}
	return string(c.Status) + "/" + c.Reason, nil
}

// TestPlacementSpreadsOverNodesAndZones (issue 25, item 2): with nothing said about placement, a
// 3-member cluster on three nodes in three zones gets one member per node and per zone, status
// names each member's node and zone, and PlacementAtRisk is False. A 4th member on the same three
// nodes must share one: the condition then says which.
func TestPlacementSpreadsOverNodesAndZones(t *testing.T) {
	t.Parallel()
	ns := f.Namespace(t)
	pool := ns
	nodes := nodePool(t, pool, "zone-a", "zone-b", "zone-c")
	create(t, newCluster(ns, "spread", 3, stewardv1.StorageMediumDefault, onPool(pool)))
	waitSettled(t, ns, "spread", 3, 4*time.Minute)

	onNode, inZone := memberPlacement(t, ns, "spread")
	seenNode, seenZone := map[string]string{}, map[string]string{}
	for m, n := range onNode {
		if !strings.Contains(strings.Join(nodes, " "), n) || n == "" {
			t.Errorf("status puts %s on node %q, not one of the pool's %v", m, n, nodes)
		}
		if other, dup := seenNode[n]; dup {
			t.Errorf("%s and %s share node %s", m, other, n)
		}
		seenNode[n] = m
		z := inZone[m]
		if other, dup := seenZone[z]; dup || z == "" {
			t.Errorf("%s and %s share zone %q", m, other, z)
		}
		seenZone[z] = m
	}
	t.Logf("placement: nodes %v zones %v", onNode, inZone)
	f.WaitFor(t, ns, "PlacementAtRisk False", time.Minute, func(ctx context.Context) (bool, error) {
		c, err := placementCondition(ctx, ns, "spread")
		return c == string(metav1.ConditionFalse)+"/"+plan.ReasonSpread, fmt.Errorf("PlacementAtRisk %s %w", c, err)
	})

	update(t, ns, "spread", func(ec *stewardv1.EtcdCluster) { ec.Spec.Replicas = ptr.To(int32(4)) })
	waitSettled(t, ns, "spread", 4, 4*time.Minute)
	f.WaitFor(t, ns, "PlacementAtRisk True (MembersShareNode)", time.Minute, func(ctx context.Context) (bool, error) {
		c, err := placementCondition(ctx, ns, "spread")
		return c == string(metav1.ConditionTrue)+"/"+plan.ReasonMembersShareNode, fmt.Errorf("PlacementAtRisk %s %w", c, err)
	})
}
