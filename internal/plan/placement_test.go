package plan

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// voters builds placements "c-0", "c-1", … from node/zone pairs written "node/zone" ("node" alone:
// no zone label; "" not scheduled).
func voters(where ...string) []Placement {
	out := make([]Placement, len(where))
	for i, w := range where {
		node, zone, _ := strings.Cut(w, "/")
		out[i] = Placement{Member: "c-" + string(rune('0'+i)), Node: node, Zone: zone}
	}
	return out
}

func TestJudgePlacement(t *testing.T) {
	tests := []struct {
		name    string
		voters  []Placement
		unknown bool // the member list could not be read
		status  metav1.ConditionStatus
		reason  string
		message []string // parts the message must hold
	}{
		{name: "member list unknown", voters: voters("a/z1", "a/z1", "a/z1"), unknown: true,
			status: metav1.ConditionUnknown, reason: ReasonPlacementUnknown, message: []string{"member list"}},
		{name: "no voter yet", status: metav1.ConditionFalse, reason: ReasonFewerThanThreeVoters, message: []string{"0 voter(s)"}},
		{name: "a single member is never judged", voters: voters("a/z1"),
			status: metav1.ConditionFalse, reason: ReasonFewerThanThreeVoters, message: []string{"1 voter(s)"}},
		{name: "two voters on one node: either loss costs quorum anyway", voters: voters("a/z1", "a/z1"),
			status: metav1.ConditionFalse, reason: ReasonFewerThanThreeVoters, message: []string{"from 3 voters on"}},
		{name: "three nodes, three zones", voters: voters("a/z1", "b/z2", "c/z3"),
			status: metav1.ConditionFalse, reason: ReasonSpread, message: []string{"3 voters on 3 nodes in 3 zones"}},
		{name: "three nodes without zone labels", voters: voters("a", "b", "c"),
			status: metav1.ConditionFalse, reason: ReasonSpread, message: []string{"3 voters on 3 nodes", "zones not judged"}},
		{name: "one node of three lacks the zone label: zones not judged", voters: voters("a/z1", "b/z1", "c"),
			status: metav1.ConditionFalse, reason: ReasonSpread, message: []string{"zones not judged"}},
		{name: "single-node Kubernetes", voters: voters("a", "a", "a"),
			status: metav1.ConditionTrue, reason: ReasonMembersShareNode,
			message: []string{"c-0, c-1, c-2 share node a (losing it costs quorum)", "add nodes"}},
		{name: "two of three share a node", voters: voters("a", "a", "b"),
			status: metav1.ConditionTrue, reason: ReasonMembersShareNode,
			message: []string{"c-0, c-1 share node a (losing it costs quorum)", "kubernetes.io/hostname with DoNotSchedule"}},
		{name: "two of five share a node: quorum survives it, but not one more failure", voters: voters("a", "a", "b", "c", "d"),
			status: metav1.ConditionTrue, reason: ReasonMembersShareNode,
			message: []string{"c-0, c-1 share node a (losing it takes 2 voters at once)"}},
		{name: "two crowded nodes, the fuller first", voters: voters("b", "a", "a", "a", "b"),
			status: metav1.ConditionTrue, reason: ReasonMembersShareNode,
			message: []string{"c-1, c-2, c-3 share node a (losing it costs quorum); c-0, c-4 share node b (losing it takes 2 voters at once)"}},
		{name: "three nodes in two zones: one holds a majority", voters: voters("a/z1", "b/z1", "c/z2"),
			status: metav1.ConditionTrue, reason: ReasonZoneHoldsMajority,
			message: []string{"zone z1 holds 2 of 3 voters (c-0, c-1): losing it costs quorum", "at least 3 zones"}},
		{name: "every node in one zone", voters: voters("a/z1", "b/z1", "c/z1"),
			status: metav1.ConditionTrue, reason: ReasonZoneHoldsMajority, message: []string{"zone z1 holds 3 of 3 voters"}},
		{name: "five voters, two per zone at most", voters: voters("a/z1", "b/z1", "c/z2", "d/z2", "e/z3"),
			status: metav1.ConditionFalse, reason: ReasonSpread, message: []string{"5 voters on 5 nodes in 3 zones"}},
		{name: "five voters, three in one zone", voters: voters("a/z1", "b/z1", "c/z1", "d/z2", "e/z3"),
			status: metav1.ConditionTrue, reason: ReasonZoneHoldsMajority, message: []string{"zone z1 holds 3 of 5 voters"}},
		{name: "a shared node inside a majority zone: both said, the node first", voters: voters("a/z1", "a/z1", "b/z2"),
			status: metav1.ConditionTrue, reason: ReasonMembersShareNode,
			message: []string{"c-0, c-1 share node a", "zone z1 holds 2 of 3 voters"}},
		{name: "a voter not scheduled is not counted", voters: voters("a/z1", "b/z2", ""),
			status: metav1.ConditionFalse, reason: ReasonSpread,
			message: []string{"2 voters on 2 nodes in 2 zones", "1 voter(s) not scheduled are not counted"}},
		{name: "an unscheduled voter does not hide a shared node", voters: voters("a", "a", ""),
			status: metav1.ConditionTrue, reason: ReasonMembersShareNode,
			message: []string{"c-0, c-1 share node a (losing it costs quorum)", "1 voter(s) not scheduled"}},
		{name: "no voter scheduled", voters: voters("", "", ""),
			status: metav1.ConditionFalse, reason: ReasonSpread, message: []string{"0 voters on 0 nodes", "zones not judged"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, reason, msg := judgePlacement(tt.voters, !tt.unknown)
			if status != tt.status || reason != tt.reason {
				t.Errorf("= %s %s, want %s %s (%s)", status, reason, tt.status, tt.reason, msg)
			}
			for _, part := range tt.message {
				if !strings.Contains(msg, part) {
					t.Errorf("message %q lacks %q", msg, part)
				}
			}
		})
	}
}

// The planner reports each member's node and zone and judges only the voters of etcd's member
// list; the condition changes neither Available nor Degraded.
func TestPlacementInStatus(t *testing.T) {
	f := healthyFacts(t, 3, "")
	for i, where := range []string{"a/z1", "a/z1", "b/z2"} {
		f.Members[i].Pod.Node, f.Members[i].Pod.Zone, _ = strings.Cut(where, "/")
	}
	spread := healthyFacts(t, 3, "")
	for i, node := range []string{"a", "b", "c"} {
		spread.Members[i].Pod.Node = node
	}
	crowded, apart := Plan(f), Plan(spread)
	c := meta.FindStatusCondition(crowded.Conditions, ConditionPlacementAtRisk)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonMembersShareNode {
		t.Fatalf("condition = %+v, want True %s", c, ReasonMembersShareNode)
	}
	if m := crowded.Members[1]; m.Node != "a" || m.Zone != "z1" {
		t.Errorf("status of %s says node %q zone %q, want a z1", m.Name, m.Node, m.Zone)
	}
	for _, typ := range []string{"Available", "Degraded"} {
		a, b := meta.FindStatusCondition(crowded.Conditions, typ), meta.FindStatusCondition(apart.Conditions, typ)
		if a == nil || b == nil || a.Status != b.Status || a.Reason != b.Reason {
			t.Errorf("%s differs with placement: %+v vs %+v", typ, a, b)
		}
	}
	if c := meta.FindStatusCondition(apart.Conditions, ConditionPlacementAtRisk); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("members on three nodes: condition %+v, want False", c)
	}

	// A learner is no voter: c-3, a learner on node a, shares nothing that counts.
	f = healthyFacts(t, 3, "")
	f.newMember(3, stewardv1.MemberRunning).Pod = Pod{Exists: true}
	f.addLearner("c-3", false)
	for i := range f.Members {
		f.Members[i].Pod.Node = []string{"a", "b", "c", "a"}[i]
	}
	c = meta.FindStatusCondition(Plan(f).Conditions, ConditionPlacementAtRisk)
	if c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("a learner beside a voter counted: %+v", c)
	}
	// A member without a Pod has no node, whatever the facts held before.
	f = healthyFacts(t, 3, "")
	f.m("c-0").Pod = Pod{Node: "gone"}
	if m := Plan(f).Members[0]; m.Node != "" {
		t.Errorf("a member without a Pod reports node %q", m.Node)
	}
}
