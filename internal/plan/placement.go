package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConditionPlacementAtRisk is True when one node's or one zone's loss would take more voters at
// once than the cluster should lose: two voters on one node, or a zone holding a majority of them.
// It warns and changes nothing else: Available and Degraded keep their meaning.
const ConditionPlacementAtRisk = "PlacementAtRisk"

// Reasons of PlacementAtRisk.
const (
	ReasonMembersShareNode     = "MembersShareNode"
	ReasonZoneHoldsMajority    = "ZoneHoldsMajority"
	ReasonSpread               = "Spread"
	ReasonFewerThanThreeVoters = "FewerThanThreeVoters"
	ReasonPlacementUnknown     = "VotersUnknown"
)

// Placement is where one voter runs: its Pod's node ("" while unscheduled) and that node's zone
// label ("" when it has none).
type Placement struct{ Member, Node, Zone string }

// placementCondition judges the voters of etcd's member list where their Pods run.
func (v *view) placementCondition() metav1.Condition {
	var voters []Placement
	for _, m := range v.members {
		if m.voter() {
			p := Placement{Member: m.Name}
			if m.Pod.Exists {
				p.Node, p.Zone = m.Pod.Node, m.Pod.Zone
			}
			voters = append(voters, p)
		}
	}
	status, reason, msg := judgePlacement(voters, v.f.Etcd.MemberListKnown())
	return metav1.Condition{Type: ConditionPlacementAtRisk, Status: status, Reason: reason, Message: msg}
}

// judgePlacement is the verdict on where the voters run. Fewer than three voters lose quorum with
// any one member wherever they run, so only three and more are judged. Zones are judged only when
// every scheduled voter's node carries a zone label: a cluster without zones is not at risk of
// losing one. Voters not scheduled yet are not counted (their place is not known).
func judgePlacement(voters []Placement, memberListKnown bool) (metav1.ConditionStatus, string, string) {
	if !memberListKnown {
		return metav1.ConditionUnknown, ReasonPlacementUnknown, "etcd's member list could not be read: which members vote is not known"
	}
	n := len(voters)
	if n < 3 {
		return metav1.ConditionFalse, ReasonFewerThanThreeVoters, fmt.Sprintf("%d voter(s): losing any one member "+
			"costs quorum wherever it runs; placement can protect a cluster from 3 voters on", n)
	}
	quorum := n/2 + 1
	byNode, byZone := map[string][]string{}, map[string][]string{}
	placed, zoned := 0, true
	for _, p := range voters {
		if p.Node == "" {
			continue
		}
		placed++
		byNode[p.Node] = append(byNode[p.Node], p.Member)
		byZone[p.Zone] = append(byZone[p.Zone], p.Member)
		zoned = zoned && p.Zone != ""
	}
	zoned = zoned && placed > 0
	var reason string
	var risks []string
	for _, node := range crowded(byNode, 2) {
		ms := byNode[node]
		reason = cmp.Or(reason, ReasonMembersShareNode)
		risks = append(risks, fmt.Sprintf("%s share node %s (losing it %s)", strings.Join(ms, ", "), node, costs(len(ms), quorum)))
	}
	if reason != "" {
		risks = append(risks, "add nodes so each voter has its own: the default spread (or a topologySpreadConstraint of "+
			"your own on kubernetes.io/hostname with DoNotSchedule) places a member's Pod apart when it is next created "+
			"(a roll you start, or deleting its Pod; a Pod bound to a node-local volume stays on that node)")
	}
	if zoned {
		for _, zone := range crowded(byZone, quorum) {
			reason = cmp.Or(reason, ReasonZoneHoldsMajority)
			risks = append(risks, fmt.Sprintf("zone %s holds %d of %d voters (%s): losing it costs quorum; run nodes in "+
				"at least 3 zones (labelled topology.kubernetes.io/zone) so the default spread places members across them, "+
				"or spread them with a topologySpreadConstraint of your own", zone, len(byZone[zone]), n, strings.Join(byZone[zone], ", ")))
		}
	}
	unplaced := ""
	if placed < n {
		unplaced = fmt.Sprintf(" (%d voter(s) not scheduled are not counted)", n-placed)
	}
	if reason != "" {
		return metav1.ConditionTrue, reason, strings.Join(risks, "; ") + unplaced
	}
	where := fmt.Sprintf("%d voters on %d nodes", placed, len(byNode))
	if zoned {
		return metav1.ConditionFalse, ReasonSpread, fmt.Sprintf("%s in %d zones: no node holds two and no zone a majority%s",
			where, len(byZone), unplaced)
	}
	return metav1.ConditionFalse, ReasonSpread, fmt.Sprintf("%s: no node holds two; zones not judged (not every node "+
		"carries a topology.kubernetes.io/zone label)%s", where, unplaced)
}

// crowded lists the keys holding at least min members, most crowded first.
func crowded(by map[string][]string, least int) []string {
	var out []string
	for k, ms := range by {
		if len(ms) >= least {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Or(len(by[b])-len(by[a]), strings.Compare(a, b)) })
	return out
}

// costs says what losing a node holding k of the voters does to a cluster needing quorum of them.
func costs(k, quorum int) string {
	if k >= quorum {
		return "costs quorum"
	}
	return fmt.Sprintf("takes %d voters at once", k)
}
