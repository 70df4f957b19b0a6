package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/health"
)

// corruption answers a CORRUPT alarm (issue 12): etcd's corruption check found one member's data
// differing from the others'. When the alarm names exactly one member and the others agree (a
// quorum of healthy voters besides it), that member is replaced through the chokepoint: removed,
// its data deleted, a fresh learner copies the others' data. The alarm is disarmed once it names
// no member of the cluster any more. Otherwise nothing is touched and the wait says what a human
// should do.
func (v *view) corruption() (Action, bool) {
	var ids []uint64
	for _, a := range v.f.Etcd.Alarms {
		if a.Type == health.AlarmCorrupt && !slices.Contains(ids, a.MemberID) {
			ids = append(ids, a.MemberID)
		}
	}
	if len(ids) == 0 || !v.f.Etcd.MemberListKnown() {
		return Action{}, false
	}
	if len(ids) > 1 {
		return wait(ReasonCorruptManual, "CORRUPT raised on %d members (%s): Steward cannot tell which data is right; "+
			"compare `etcdctl endpoint hashkv --cluster`, or restore the newest good backup into a new cluster", len(ids),
			v.idNames(ids)), true
	}
	var bad *memberView
	for _, m := range v.members {
		if m.live != nil && m.live.ID == ids[0] {
			bad = m
		}
	}
	if bad == nil {
		a := act(DisarmAlarm, "", ReasonCorruptReplaced, "disarming CORRUPT: member %x is no longer in the cluster", ids[0])
		a.Alarm = health.AlarmCorrupt
		return a, true
	}
	g := health.Gate(v.f.Etcd, health.Expectation{Voters: v.expectedVoters(), Skip: []string{bad.Name},
		Tolerance: v.lim.AppliedIndexTolerance, AllowCorruptOn: ids[0]})
	if g.Check == health.CheckAlarm {
		return wait(ReasonCorruptManual, "CORRUPT raised on %s while other alarms stand (%s): Steward replaces a corrupt member only "+
			"when CORRUPT on it is the only alarm", bad.Name, v.f.Etcd.AlarmMessage()), true
	}
	if !g.Passed() {
		return wait(ReasonCorruptManual, "CORRUPT raised on %s, but the other members are not all healthy and caught up "+
			"(%s): Steward replaces a corrupt member only while the others agree; check `etcdctl endpoint hashkv --cluster`", bad.Name, g), true
	}
	if bad.leader {
		return v.moveLeader(bad, "replacing it (CORRUPT)"), true
	}
	a, _ := v.disrupt(act(RemoveMember, bad.Name, ReasonCorrupt, "replacing %s: etcd's corruption check found its data differs "+
		"from the other members'", bad.Name), disruption.Replace)
	a.MemberID = bad.id()
	return a, true
}

func (v *view) idNames(ids []uint64) string {
	var out []string
	for _, id := range ids {
		name := fmt.Sprintf("member %x", id)
		for _, m := range v.members {
			if m.live != nil && m.live.ID == id {
				name = m.Name
			}
		}
		out = append(out, name)
	}
	return strings.Join(out, ", ")
}
