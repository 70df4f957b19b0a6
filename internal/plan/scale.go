package plan

import (
	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
)

// scale takes one step towards spec.replicas, only on a healthy cluster with no learner (the gate
// checks both). Up: a new member at the lowest free ordinal (it then joins as a learner). Down: the
// highest ordinal goes, leadership handed off first; its finalizer flow removes it from etcd.
func (v *view) scale() (Action, bool) {
	active, n := v.active(), v.f.replicas()
	if len(active) == n {
		return Action{}, false
	}
	if r := v.gate(); !r.Passed() {
		return wait(ReasonWaitingForHealth, "scaling to %d waits for the recovery gate: %s", n, r), true
	}
	if len(active) < n {
		ord := v.lowestFreeOrdinal()
		a := act(CreateMember, memberName(v.f, ord), ReasonScalingUp, "scaling up: creating member #%d (%d of %d)", ord, len(active)+1, n)
		a.Ordinal = ord
		return a, true
	}
	victim := v.surplus()[0]
	reason, why := v.surplusReason(victim)
	if victim.leader {
		return v.moveLeader(victim, "removing it"), true
	}
	a, blocked := v.disrupt(act(DeleteMember, victim.Name, reason, "%s (%d of %d)", why, len(active)-1, n), disruption.Remove)
	if blocked || a.Kind == Wait {
		return a, true
	}
	// Deleting the object is the intent; the disruption itself (MemberRemove) follows in the
	// finalizer flow through the Disrupter.
	a.Disruption = nil
	a.MemberID = victim.id()
	return a, true
}

// lowestFreeOrdinal: scale-out takes the lowest ordinal no member object holds (a member still being
// deleted holds its name until it is gone).
func (v *view) lowestFreeOrdinal() int32 {
	used := map[int32]bool{}
	for _, m := range v.members {
		used[m.Ordinal] = true
	}
	for _, o := range v.f.ReservedOrdinals {
		used[o] = true
	}
	var o int32
	for used[o] {
		o++
	}
	return o
}

// housekeeping grows PVCs to the target size, one at a time. A StorageClass that cannot expand is
// reported and nothing is disrupted; a filesystem resize that waits for a restart gets one, through
// the same gate and disruption check as a roll.
func (v *view) housekeeping() (Action, bool) {
	if v.f.memory() {
		return Action{}, false
	}
	for _, m := range v.active() {
		p := m.PVC
		if !p.Exists || p.Capacity.IsZero() || p.Requested.Cmp(p.Capacity) <= 0 {
			continue
		}
		if p.FileSystemResizePending {
			return v.restartForResize(m), true
		}
		return wait(ReasonExpandingStorage, "waiting for %s's volume to grow to %s", m.Name, p.Requested.String()), true
	}
	for _, m := range v.active() {
		if !v.kept(m) || !m.change.Has(ChangeExpand) {
			continue
		}
		if !m.PVC.Resizable {
			return wait(ReasonStorageNotExpandable, "storage.size %s cannot be applied: the StorageClass of %s's PVC does not allow "+
				"volume expansion; nothing was disrupted", v.target.Storage.Size.String(), m.Name), true
		}
		return act(ExpandPVC, m.Name, ReasonExpandingStorage, "expanding %s's PVC to %s", m.Name, v.target.Storage.Size.String()), true
	}
	return Action{}, false
}

func (v *view) restartForResize(m *memberView) Action {
	if v.f.strategy() == stewardv1.OnDelete {
		return wait(ReasonResizingFilesystem, "%s's filesystem grows when its Pod restarts (updateStrategy OnDelete: delete it)", m.Name)
	}
	if r := v.gate(m.Name); !r.Passed() {
		return wait(ReasonWaitingForHealth, "restarting %s to grow its filesystem waits for the recovery gate: %s", m.Name, r)
	}
	if m.leader {
		return v.moveLeader(m, "restarting it to grow its filesystem")
	}
	a, _ := v.disrupt(act(DeletePod, m.Name, ReasonResizingFilesystem, "restarting %s so its filesystem grows", m.Name), disruption.Restart)
	return a
}
