package plan

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/health"
)

const (
	// NoSpaceFitPercent: NOSPACE is disarmed once every voter's file is under this share of its
	// quota, so the first writes after it do not raise it again at once.
	NoSpaceFitPercent = 80
	// CompactKeep is how many of the newest revisions the first compaction keeps; only if that
	// is not enough does the next one compact to the head revision.
	CompactKeep = 1000
)

// noSpace recovers from a NOSPACE alarm without a human and without restarting anyone
// (spec.maintenance.nospace Recover, issue 12): defragment members that have free pages, one at a
// time, leader last; when none has, compact history (keeping the newest CompactKeep revisions
// first, everything before the head if that was not enough); disarm when every file fits.
func (v *view) noSpace() (Action, bool) {
	e := v.f.Etcd
	if !e.HasAlarm(health.AlarmNoSpace) || v.f.Cluster.Spec.NoSpacePolicy() != stewardv1.NoSpaceRecover || !e.MemberListKnown() {
		return Action{}, false
	}
	if e.HasAlarm(health.AlarmCorrupt) {
		return Action{}, false // data may be wrong somewhere: nothing is compacted or disarmed on top of it
	}
	var voters []*memberView
	for _, m := range v.active() {
		if m.voter() {
			if m.ep == nil || !m.ep.Reachable || m.ep.DBSize == 0 {
				return wait(ReasonRecoveringFromNoSpace, "recovering from NOSPACE waits for %s to answer", m.Name), true
			}
			voters = append(voters, m)
		}
	}
	if len(voters) == 0 {
		return Action{}, false
	}
	if fits := !slices.ContainsFunc(voters, func(m *memberView) bool { return !fitsQuota(m) }); fits {
		return act(DisarmAlarm, "", ReasonNoSpaceRecovered, "disarming NOSPACE: every member's file is under %d%% of its quota (%s)",
			NoSpaceFitPercent, sizesText(voters)), true
	}
	if gain := v.noSpaceDefragOrder(voters); len(gain) > 0 {
		return v.noSpaceDefragment(gain[0]), true
	}
	return v.noSpaceCompact(voters), true
}

func (v *view) notDefragmentedSinceCompaction(m *memberView) bool {
	s := v.f.Cluster.Status.Maintenance
	if s == nil || s.LastCompaction == nil {
		return false
	}
	// Revisions, not times: status times have second precision, and a compaction and the
	// defragmentations around it fall in the same second.
	return m.Defrag == nil || m.Defrag.AfterCompaction < s.LastCompaction.Revision
}

func fitsQuota(m *memberView) bool { return m.ep.DBSize*100 < NoSpaceFitPercent*quota(m) }

// noSpaceDefragOrder: members whose file has at least 1 MiB and 5% of free pages, and every member
// not defragmented since Steward's last compaction, followers first, the most to gain first;
// failing members wait their backoff. The second group matters because a compaction's pages stay
// "pending" in bbolt (not counted free) until a later write transaction releases them, and NOSPACE
// refuses every write: dbSizeInUse does not drop on a member until it is defragmented.
func (v *view) noSpaceDefragOrder(voters []*memberView) []*memberView {
	var out []*memberView
	for _, m := range voters {
		free := m.ep.DBSize - m.ep.DBSizeInUse
		if (free >= 1<<20 && free*20 >= m.ep.DBSize || v.notDefragmentedSinceCompaction(m)) && !v.defragBackingOff(m) {
			out = append(out, m)
		}
	}
	slices.SortStableFunc(out, func(a, b *memberView) int {
		return cmp.Or(leaderLast(a, b), cmp.Compare(b.ep.DBSize-b.ep.DBSizeInUse, a.ep.DBSize-a.ep.DBSizeInUse))
	})
	return out
}

func (v *view) noSpaceDefragment(m *memberView) Action {
	if v.voterCount() > 1 {
		g := health.Gate(v.f.Etcd, health.Expectation{Voters: v.expectedVoters(), Skip: []string{m.Name},
			Tolerance: v.lim.AppliedIndexTolerance, AllowNoSpace: true})
		if !g.Passed() {
			return wait(ReasonWaitingForHealth, "defragmenting %s to recover from NOSPACE waits for the recovery gate: %s", m.Name, g)
		}
		if m.leader {
			return v.moveLeader(m, "defragmenting it")
		}
	}
	a := act(Defragment, m.Name, ReasonRecoveringFromNoSpace, "defragmenting %s to recover from NOSPACE (%s of %s in use)", m.Name,
		bytes(m.ep.DBSizeInUse), bytes(m.ep.DBSize))
	a.DefragTrigger = stewardv1.DefragmentationNoSpace
	res, _ := v.disrupt(a, disruption.Defragment)
	return res
}

// noSpaceCompact: no file can shrink by defragmenting, so history goes. The first compaction keeps
// the newest CompactKeep revisions; if the last one Steward made already did (and space is still
// short), the next goes to the head. Past that only the user can help.
func (v *view) noSpaceCompact(voters []*memberView) Action {
	var head int64
	for _, m := range voters {
		head = max(head, m.ep.Revision)
	}
	var last *stewardv1.CompactionRecord
	if s := v.f.Cluster.Status.Maintenance; s != nil {
		last = s.LastCompaction
	}
	if head <= 0 {
		return wait(ReasonRecoveringFromNoSpace, "recovering from NOSPACE needs the head revision, which no member reported")
	}
	if last != nil && last.Revision >= head {
		return wait(ReasonQuotaFullOfLiveData, "NOSPACE: the live data alone fills the quota (history compacted to revision %d and every member "+
			"defragmented: %s); raise spec.options.quotaBackendBytes or delete keys", last.Revision, sizesText(voters))
	}
	target := head - CompactKeep
	if target <= 1 || (last != nil && last.Revision >= target) {
		target = head
	}
	kept := keptText(head - target)
	if d := v.f.ContinuousDurable; d > 0 && target > d {
		// The continuous backup has not stored the revisions after d: compacting them away would
		// put a hole in every restore. NOSPACE refuses writes, so the streamer catches up soon.
		if last != nil && last.Revision >= d {
			return wait(ReasonRecoveringFromNoSpace, "NOSPACE: compaction waits for the continuous backup, which has stored revisions up to %d of %d "+
				"(history is compacted to %d already: %s)", d, head, last.Revision, sizesText(voters))
		}
		target, kept = d, "held at the continuous backup's durable revision"
	}
	a := act(Compact, "", ReasonRecoveringFromNoSpace, "compacting history up to revision %d of %d to recover from NOSPACE (%s; %s)",
		target, head, kept, sizesText(voters))
	a.Revision, a.HeadRevision = target, head
	return a
}

func keptText(kept int64) string {
	if kept == 0 {
		return "no older revision is kept: defragmenting alone freed too little"
	}
	return "the newest " + strconv.FormatInt(kept, 10) + " revisions are kept"
}

func sizesText(ms []*memberView) string {
	var parts []string
	for _, m := range ms {
		parts = append(parts, m.Name+" "+bytes(m.ep.DBSize)+" of "+bytes(quota(m)))
	}
	return strings.Join(parts, ", ")
}
