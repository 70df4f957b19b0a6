package plan

import (
	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
)

// recreatePods gives a PVC voter back a working Pod where that disrupts nobody: a missing Pod is
// recreated on the member's own data, and a Failed Pod (evicted, or refused at admission after a
// node reboot), whose containers never run again, is deleted so the next reconcile recreates it.
// It runs before any half-done membership change, so a removal that waits for a healthy cluster can
// never keep the repair that would make it healthy from running.
func (v *view) recreatePods(notes) outcome {
	if v.f.memory() {
		return pass()
	}
	for _, m := range v.active() {
		if m.Phase != stewardv1.MemberRunning || !m.voter() || !m.PVC.Exists || m.PVC.Deleting {
			continue
		}
		switch {
		case m.PVC.Foreign && (!m.Pod.Exists || m.Pod.Failed):
			return decided(foreignPVC(m))
		case !m.Pod.Exists:
			// Judged on the target the Pod would be built from: adoption of a pending edit comes first.
			if why := v.dataRefusal(m); why != "" {
				return built(wait(ReasonVersionStepRefused, "not recreating %s's Pod: %s", m.Name, why))
			}
			return built(act(CreatePod, m.Name, ReasonMemberPodMissing, "recreating %s's Pod; its PVC keeps the member's data", m.Name))
		case m.Pod.Failed && !m.Pod.Deleting:
			a, _ := v.disrupt(act(DeletePod, m.Name, ReasonMemberPodFailed,
				"deleting %s's Failed Pod so it is recreated on its PVC", m.Name), disruption.Restart)
			return decided(a)
		}
	}
	return pass()
}

// repair fixes one failed voter (issue 4) whose data cannot be kept: a member whose data is gone
// (memory Pod lost or Failed, PVC lost) or that crash-loops is removed and then replaced by a fresh
// member through the normal join flow. Quorum safety is disruption.Check's job.
func (v *view) repair() (Action, bool) {
	for _, m := range v.active() {
		if m.Phase != stewardv1.MemberRunning || !m.voter() {
			continue
		}
		if a, ok := v.versionRefused(m); ok {
			return a, true
		}
		switch {
		case !m.Pod.Exists && (v.f.memory() || !m.PVC.Exists || m.PVC.Deleting):
			return v.replace(m, ReasonMemberDataLost, "its Pod is gone and its data with it")
		case m.Pod.Exists && m.Pod.DataLost != "":
			// Never started on it: an empty directory would rejoin under the old ID with no
			// memory of its votes, another member's data would start as that member.
			return v.replace(m, ReasonMemberDataLost, "its data directory fails the check ("+m.Pod.DataLost+")")
		case m.Pod.Failed && v.f.memory():
			return v.replace(m, ReasonMemberPodFailed, "its Pod failed and its data in memory with it")
		case v.crashLooping(m):
			return v.replace(m, ReasonMemberCrashLooping, "it keeps crashing and etcd has not heard from it for "+
				v.lim.CrashLoopWindow.String())
		}
	}
	return Action{}, false
}

// replace removes a member so a fresh one takes its place; its stale data is deleted on the way.
func (v *view) replace(m *memberView, reason Reason, why string) (Action, bool) {
	if m.leader {
		return v.moveLeader(m, "replacing it"), true
	}
	a, _ := v.disrupt(act(RemoveMember, m.Name, reason, "replacing %s: %s", m.Name, why), disruption.Replace)
	a.MemberID = m.id()
	return a, true
}

// pending adds a created member to etcd: clean leftovers, wait for a healthy cluster, then
// MemberAddAsLearner. The Pod starts after the add, with --initial-cluster from the live list.
func (v *view) pending() (Action, bool) {
	for _, m := range v.active() {
		if m.inEtcd() || (m.Phase != stewardv1.MemberPending && m.Phase != "") {
			continue
		}
		if !v.kept(m) {
			return act(DeleteMember, m.Name, ReasonScalingDown, "%s is not needed at spec.replicas %d", m.Name, v.f.replicas()), true
		}
		if a, ok := v.pendingLeftovers(m); ok {
			return a, true
		}
		if r := v.gateRunning(); !r.Passed() {
			return wait(ReasonWaitingForHealth, "adding %s waits for the cluster to be healthy: %s", m.Name, r), true
		}
		return act(AddLearner, m.Name, ReasonJoiningMember, "adding %s as a learner", m.Name), true
	}
	return Action{}, false
}

// pendingLeftovers: a member about to join must start empty; a Pod or PVC left from a previous life
// of this name would carry a removed member's data, which etcd refuses.
func (v *view) pendingLeftovers(m *memberView) (Action, bool) {
	switch {
	case m.Pod.Exists && m.Pod.Deleting:
		return v.terminating(m), true
	case m.Pod.Exists:
		a, _ := v.disrupt(act(DeletePod, m.Name, ReasonCleaningUp, "deleting a leftover Pod of %s", m.Name), disruption.Restart)
		return a, true
	case m.PVC.Exists && m.PVC.Foreign:
		return foreignPVC(m), true
	case m.PVC.Exists && m.PVC.Deleting:
		return wait(ReasonCleaningUp, "waiting for %s's old PVC to go", m.Name), true
	case m.PVC.Exists:
		a, _ := v.disrupt(act(DeletePVC, m.Name, ReasonCleaningUp, "deleting leftover data of %s", m.Name), disruption.DeleteData)
		return a, true
	}
	return Action{}, false
}
