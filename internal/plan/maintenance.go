package plan

import (
	"cmp"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
)

// Defragmentation defaults (spec.maintenance.defragmentation) and pacing.
const (
	DefaultFragmentationPercent = 45
	// DefaultQuotaBytes is etcd's --quota-backend-bytes default.
	DefaultQuotaBytes = 2 << 30
	// DefragFailuresDegraded consecutive failures on a member make the cluster Degraded.
	DefragFailuresDegraded = 3
	// defragSpacing: a member is not defragmented by the threshold again this soon after a
	// success, so a workload that fragments faster than that does not keep it blocked.
	defragSpacing = 10 * time.Minute
)

var defaultMinDBSize = resource.MustParse("100Mi")

// defragInterrupted records a defragmentation the operator started and did not see end (it
// stopped while the call ran). etcd goes on with it regardless, so the member counts as disrupted
// until it serves linearizable reads again, or until the etcd that ran it is gone (defragEnded);
// then the record is closed as Interrupted. A record is an intent: it must not outlive its reason,
// or a member that crash-loops after it would be "still defragmenting" and never repaired.
func (v *view) defragInterrupted() (Action, bool) {
	for _, m := range v.members {
		if m.Defrag == nil || m.Defrag.StartedAt == nil {
			continue
		}
		since := m.Defrag.StartedAt.UTC().Format(time.RFC3339)
		if m.ep != nil && m.ep.Healthy && m.ep.ReadOK {
			return act(RecordDefragmentation, m.Name, ReasonDefragmentationInterrupted,
				"%s's defragmentation started %s was interrupted; it serves again", m.Name, since), true
		}
		if why := defragEnded(m); why != "" {
			return act(RecordDefragmentation, m.Name, ReasonDefragmentationInterrupted,
				"%s's defragmentation started %s was interrupted: %s", m.Name, since, why), true
		}
		if !m.voter() {
			continue // not a voter: its membership step comes first, the record waits
		}
		return wait(ReasonDefragmenting, "%s is defragmenting (since %s): waiting for it to serve again",
			m.Name, since), true
	}
	return Action{}, false
}

// defragEnded says why the etcd process that ran the member's recorded defragmentation cannot be
// running it any more, "" when it may still be: its Pod is gone or Failed, its etcd container is
// not running, was refused by the data check, or exited after the record was written.
func defragEnded(m *memberView) string {
	p := m.Pod
	switch {
	case !p.Exists || p.Deleting:
		return "its Pod is gone"
	case p.Failed:
		return "its Pod Failed"
	case p.DataLost != "":
		return "the data check refused its data: " + p.DataLost
	case p.BackOff:
		return "its etcd container is in back-off"
	case p.Stopped:
		return "its etcd container is not running"
	case p.LastTerminatedAt.After(m.Defrag.StartedAt.Time):
		return "its etcd container restarted since"
	}
	return ""
}

// defragment picks one member to defragment (issue 12): followers first, most fragmented first,
// the leader last after handing leadership away; each through the chokepoint after the gate.
func (v *view) defragment() (Action, bool) {
	due := v.defragDue()
	if len(due) == 0 {
		return Action{}, false
	}
	victim := due[0]
	trigger := stewardv1.DefragmentationThreshold
	switch {
	case victim.DefragRequested:
		trigger = stewardv1.DefragmentationRequested
	case victim.DefragScheduled:
		trigger = stewardv1.DefragmentationSchedule
	}
	a := act(Defragment, victim.Name, ReasonDefragmenting, "defragmenting %s (%s: %s of %s in use)", victim.Name,
		trigger, bytes(victim.ep.DBSizeInUse), bytes(victim.ep.DBSize))
	a.DefragTrigger = trigger
	if v.voterCount() > 1 {
		if r := v.gate(victim.Name); !r.Passed() {
			return wait(ReasonWaitingForHealth, "defragmenting %s waits for the recovery gate: %s", victim.Name, r), true
		}
		if victim.leader {
			return v.moveLeader(victim, "defragmenting it"), true
		}
	}
	res, blocked := v.disrupt(a, disruption.Defragment)
	if blocked {
		return Action{}, false // a single member without allowDowntime: nothing to do, nothing to report
	}
	return res, true
}

// defragDue are the voters due for defragmentation, in the order they go.
func (v *view) defragDue() []*memberView {
	var due []*memberView
	for _, m := range v.active() {
		if v.kept(m) && m.voter() && m.Phase == stewardv1.MemberRunning && m.ep != nil && m.ep.DBSize > 0 &&
			!v.defragBackingOff(m) && v.defragWanted(m) {
			due = append(due, m)
		}
	}
	slices.SortStableFunc(due, func(a, b *memberView) int {
		return cmp.Or(leaderLast(a, b), cmp.Compare(fragmentation(b), fragmentation(a)), cmp.Compare(b.Ordinal, a.Ordinal))
	})
	return due
}

// leaderLast orders followers before the leader: it must hand leadership away before its turn.
func leaderLast(a, b *memberView) int {
	switch {
	case a.leader == b.leader:
		return 0
	case a.leader:
		return 1
	}
	return -1
}

// fragmented: the threshold rule, and not defragmented moments ago.
func (v *view) fragmented(m *memberView) bool {
	spec := v.defragSpec()
	pct, minSize := int64(DefaultFragmentationPercent), defaultMinDBSize.Value()
	if spec.FragmentationPercent != nil {
		pct = int64(*spec.FragmentationPercent)
	}
	if spec.MinDBSize != nil {
		minSize = spec.MinDBSize.Value()
	}
	if m.ep.DBSize < minSize || (m.ep.DBSize-m.ep.DBSizeInUse)*100 < pct*m.ep.DBSize {
		return false
	}
	d := m.Defrag
	return d == nil || d.LastSucceeded == nil || !v.f.Now.Before(d.LastSucceeded.Add(defragSpacing))
}

// defragBackingOff: after a failure a member waits 1, 2, 4 ... 32 minutes before the next try.
func (v *view) defragBackingOff(m *memberView) bool {
	d := m.Defrag
	if d == nil || d.Last == nil || d.Last.Outcome != stewardv1.DefragmentationFailed || d.ConsecutiveFailures == 0 {
		return false
	}
	wait := time.Minute << min(d.ConsecutiveFailures-1, 5)
	return v.f.Now.Before(d.Last.Time.Add(wait))
}

func (v *view) defragSpec() stewardv1.DefragmentationSpec {
	if mt := v.f.Cluster.Spec.Maintenance; mt != nil {
		return mt.Defragmentation
	}
	return stewardv1.DefragmentationSpec{}
}

// fragmentation is the share of the member's file that is free pages, in per mille.
func fragmentation(m *memberView) int64 {
	if m.ep == nil || m.ep.DBSize <= 0 {
		return 0
	}
	return (m.ep.DBSize - m.ep.DBSizeInUse) * 1000 / m.ep.DBSize
}

// quota is the member's backend quota: what etcd reports (3.6+), else its template's setting,
// else etcd's default.
func quota(m *memberView) int64 {
	if m.ep != nil && m.ep.DBSizeQuota > 0 {
		return m.ep.DBSizeQuota
	}
	if q := m.Template.Options.QuotaBackendBytes; q != nil && q.Value() > 0 {
		return q.Value()
	}
	return DefaultQuotaBytes
}

func bytes(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}

// defragWanted: the user asked for it, or (when Steward may decide on its own) the schedule fired or
// the member is fragmented.
func (v *view) defragWanted(m *memberView) bool {
	if m.DefragRequested {
		return true
	}
	return v.f.Cluster.Spec.DefragmentationEnabled() && (m.DefragScheduled || v.fragmented(m))
}
