package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/health"
)

// corruption answers a CORRUPT alarm (issues 12 and 23): etcd found members' data differing. The
// alarm says that, never reliably who: etcd's periodic check runs on the leader and blames the
// follower that differs from the leader's own hash (a healthy follower when the leader is the
// corrupt one), and its compaction hash check raises it with member ID 0 when it finds no majority.
// So the voters' hashes at one common revision decide (health.Evidence): a member is replaced only
// when a strict majority of all voters agrees on one hash and its own differs. Replaced through the
// chokepoint (leadership moved away first, to a member of the majority): removed, its data deleted,
// a fresh learner copies the majority's data. The alarm is disarmed once that member has left and
// every remaining voter's hash agrees. Without a majority nothing is touched, and the wait names
// every member's hash for the human who has to choose.
func (v *view) corruption() (Action, bool) {
	var named []uint64
	for _, a := range v.f.Etcd.Alarms {
		if a.Type == health.AlarmCorrupt && !slices.Contains(named, a.MemberID) {
			named = append(named, a.MemberID)
		}
	}
	if len(named) == 0 || !v.f.Etcd.MemberListKnown() {
		return Action{}, false
	}
	ev, hashes := v.f.Etcd.HashEvidence(), v.f.Etcd.HashSummary()
	on := v.idNames(named)
	if !ev.Found() {
		return wait(ReasonCorruptionNeedsHuman, "CORRUPT raised on %s, but no strict majority of the %d voters agrees on one hash "+
			"(%s): Steward cannot tell which copy is right and touches nothing; compare `etcdctl endpoint hashkv --cluster` "+
			"at one revision, or restore the newest good backup into a new cluster", on, ev.Voters, hashes), true
	}
	if len(ev.Minority) == 0 {
		return v.corruptionSettled(ev, on, named, hashes), true
	}
	bad := v.minorityVictim(ev)
	if bad == nil {
		return wait(ReasonCorruptionNeedsHuman, "CORRUPT: the hash of %s differs from the one %d of %d voters agree on (%s), but "+
			"Steward does not manage it; remove it (etcdctl member remove)", v.idNames(ev.Minority), len(ev.Majority), ev.Voters, hashes), true
	}
	g := health.Gate(v.f.Etcd, health.Expectation{Voters: v.expectedVoters(), Skip: []string{bad.Name},
		Tolerance: v.lim.AppliedIndexTolerance, AllowCorrupt: true})
	if g.Check == health.CheckAlarm {
		return wait(ReasonCorruptionNeedsHuman, "%s's hash differs from the majority's while other alarms stand (%s): Steward replaces "+
			"a corrupt member only when CORRUPT is the only alarm", bad.Name, v.f.Etcd.AlarmMessage()), true
	}
	if !g.Passed() {
		return wait(ReasonCorruptionNeedsHuman, "%s's hash differs from the majority's, but the other members are not all healthy and "+
			"caught up (%s): Steward replaces a corrupt member only while the others agree; hashes: %s", bad.Name, g, hashes), true
	}
	majority := func(m *memberView) bool { return slices.Contains(ev.Majority, m.id()) }
	if bad.leader {
		return v.moveLeaderAmong(bad, "replacing it (its hash differs from the majority's)", majority), true
	}
	a, _ := v.disrupt(act(RemoveMember, bad.Name, ReasonMemberCorrupt, "replacing %s: its hash differs from the one %d of %d "+
		"voters agree on (%s; CORRUPT raised on %s)", bad.Name, len(ev.Majority), ev.Voters, hashes, on), disruption.Replace)
	a.MemberID = bad.id()
	return a, true
}

// corruptionSettled: a majority agrees and no answering voter differs. The alarm is disarmed only
// when every voter answered alike and a member is known to have gone for it: one removed for
// replacement, or (the alarm naming members) every named member out of the cluster. ID 0 names
// nobody, so its absence from the member list proves nothing; and hashes that agree with nobody
// replaced mean Steward found no corrupt copy, which a human must judge (a manual alarm, a
// difference etcd saw in revisions since compacted).
func (v *view) corruptionSettled(ev health.HashEvidence, on string, named []uint64, hashes string) Action {
	if !ev.Unanimous() {
		return wait(ReasonCorruptionNeedsHuman, "CORRUPT raised on %s: %d of %d voters agree on hash %08x at revision %d and no "+
			"answering voter differs, but the others could not be compared (%s); waiting for every voter's hash",
			on, len(ev.Majority), ev.Voters, ev.Hash, ev.Revision, hashes)
	}
	if v.corruptMemberGone(named) {
		a := act(DisarmAlarm, "", ReasonCorruptMemberReplaced, "disarming CORRUPT (raised on %s): the member whose copy differed "+
			"has left and all %d voters agree (%s)", on, ev.Voters, hashes)
		a.Alarm = health.AlarmCorrupt
		return a
	}
	return wait(ReasonCorruptionNeedsHuman, "CORRUPT raised on %s, but all %d voters agree on hash %08x at revision %d: Steward "+
		"finds no corrupt copy and replaces nobody; if you know the alarm is stale, disarm it (etcdctl alarm disarm)",
		on, ev.Voters, ev.Hash, ev.Revision)
}

// corruptMemberGone: a member was removed for replacement and is not back in etcd yet, or every
// member the alarm names (none of them 0) has left the cluster.
func (v *view) corruptMemberGone(named []uint64) bool {
	for _, m := range v.members {
		if m.Replacing && !m.inEtcd() {
			return true
		}
	}
	for _, id := range named {
		if id == 0 || slices.ContainsFunc(v.f.Etcd.Members, func(l health.Member) bool { return l.ID == id }) {
			return false
		}
	}
	return true
}

// minorityVictim picks the managed voter in the minority to replace first: a follower before the
// leader (no leadership move needed), then by ordinal. nil when only unmanaged members differ.
func (v *view) minorityVictim(ev health.HashEvidence) *memberView {
	var out *memberView
	for _, m := range v.members {
		if !m.voter() || !slices.Contains(ev.Minority, m.id()) {
			continue
		}
		if out == nil || (out.leader && !m.leader) {
			out = m
		}
	}
	return out
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
