package plan

import (
	"time"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/evidence"
	"github.com/etcd-steward/steward/internal/health"
)

// halfDone finishes what a previous reconcile started, deciding from the live member list whether
// the etcd call behind each recorded intent already happened (invariant 5). Nothing new starts while
// a Pod is on its way out.
// A removal the chokepoint refuses for now comes back as a note (removalWait) for waitingRemoval.
func (v *view) halfDoneStep(notes) outcome {
	a, ok, waiting := v.halfDoneMembership()
	if !ok {
		for _, m := range v.members {
			// A Pod terminating on a lost node is the node loss step's: it replaces the member.
			if m.inEtcd() && m.Pod.Exists && m.Pod.Deleting && v.loss(m).Kind == evidence.NoLoss {
				a, ok = v.terminating(m), true
				break
			}
		}
	}
	o := decidedIf(a, ok)
	o.notes.removalWait = waiting
	return o
}

// halfDoneMembership: recorded phases first, then learners, removals, orphans. waiting is the
// first removal the chokepoint refused for now, when the removals ran.
func (v *view) halfDoneMembership() (a Action, ok bool, waiting *Action) {
	if a, ok := v.recordPhases(); ok {
		return a, true, nil
	}
	if a, ok := v.learners(); ok {
		return a, true, nil
	}
	a, ok, waiting = v.removals()
	if ok {
		return a, true, waiting
	}
	if a, ok := v.orphanMembers(); ok {
		return a, true, waiting
	}
	return Action{}, false, waiting
}

// recordPhases brings recorded phases in line with the live member list.
func (v *view) recordPhases() (Action, bool) {
	for _, m := range v.members {
		if m.Deleting || m.Phase == stewardv1.MemberRemoving {
			continue // the removal flow owns these
		}
		switch {
		case m.learner() && m.Phase != stewardv1.MemberLearner:
			return record(m, stewardv1.MemberLearner, "MemberAddAsLearner already happened"), true
		case m.voter() && m.Phase != stewardv1.MemberRunning:
			return record(m, stewardv1.MemberRunning, "the member is already a voter"), true
		case m.inEtcd() && m.ID != m.recordedID():
			return record(m, m.Phase, "recording the live member ID"), true
		case m.inEtcd():
			continue
		case m.Phase == stewardv1.MemberJoining:
			if r := v.gateRunning(); !r.Passed() {
				// MemberAdd never happened; withdraw the intent so a repair can run first.
				return record(m, stewardv1.MemberPending, "withdrawing the join until the cluster is healthy: "+r.String()), true
			}
			return act(AddLearner, m.Name, ReasonJoiningMember, "MemberAddAsLearner for %s did not happen yet; adding it", m.Name), true
		case m.Phase == stewardv1.MemberLearner || m.Phase == stewardv1.MemberRunning:
			// Gone from etcd behind our back: its data is stale; replace it through the removal flow.
			a := record(m, stewardv1.MemberRemoving, "the member left etcd; replacing it")
			a.Replacing = m.Phase == stewardv1.MemberRunning
			return a, true
		}
	}
	return Action{}, false
}

func record(m *memberView, p stewardv1.MemberPhase, why string) Action {
	a := act(RecordPhase, m.Name, ReasonRecordingProgress, "%s: recording phase %s (%s)", m.Name, p, why)
	a.Phase, a.MemberID = p, m.id()
	return a
}

// learners: never two; promote the one that caught up, start its Pod, or give up on it after the
// learner timeout (it is removed, then re-added by the normal flow).
func (v *view) learners() (Action, bool) {
	if v.f.abortingAdoption() {
		return Action{}, false // the abort removes Steward's members, learners included (handOver)
	}
	var ours []*memberView
	for _, m := range v.members {
		if m.learner() {
			ours = append(ours, m)
		}
	}
	for _, o := range v.orphans {
		if o.IsLearner {
			return v.removeOrphan(o), true
		}
	}
	if len(ours) > 1 {
		extra := ours[len(ours)-1] // the newest (highest ordinal) goes
		a, _ := v.disrupt(act(RemoveMember, extra.Name, ReasonExtraLearner,
			"two learners exist; removing %s", extra.Name), disruption.Remove)
		a.MemberID = extra.id()
		return a, true
	}
	if len(ours) == 0 {
		return Action{}, false
	}
	l := ours[0]
	if l.Deleting || l.Phase == stewardv1.MemberRemoving {
		return Action{}, false // the removal flow owns it
	}
	return v.learner(l), true
}

func (v *view) learner(l *memberView) Action {
	if !l.Pod.Exists {
		if l.PVC.Foreign {
			return foreignPVC(l)
		}
		return act(CreatePod, l.Name, ReasonStartingMember, "starting learner %s", l.Name)
	}
	r := health.LearnerCaughtUp(v.f.Etcd, l.Name, v.lim.AppliedIndexTolerance)
	if l.Pod.Ready && !l.Pod.Deleting && r.Passed() {
		a := act(PromoteLearner, l.Name, ReasonPromotingLearner, "promoting learner %s", l.Name)
		a.MemberID = l.id()
		return a
	}
	refused := l.Pod.JoinRefused
	if refused != "" && v.f.Adopting() && evidence.PeerRefusedCertificate(refused) {
		return v.joinRefused(l)
	}
	if v.olderThan(l.PhaseSince, v.lim.LearnerTimeout) {
		a, _ := v.disrupt(act(RemoveMember, l.Name, ReasonLearnerStuck,
			"learner %s did not catch up within %s; removing it to retry", l.Name, v.lim.LearnerTimeout), disruption.Remove)
		a.MemberID = l.id()
		return a
	}
	switch {
	case refused != "":
		return v.joinRefused(l)
	case l.Pod.Unschedulable && v.surging():
		// An add-first successor: no node has room for one member Pod more. Dropping to
		// remove-first would cost a voter, which is the user's call, not a scheduling outcome.
		return wait(ReasonMemberUnschedulable, "learner %s, added first to replace a member (a roll or a drain), cannot be scheduled: "+
			"make room for one more member Pod, or set spec.updateStrategy.maxSurge: 0 to replace members remove-first "+
			"(one voter fewer while each successor catches up)", l.Name)
	case l.Pod.Unschedulable:
		return wait(ReasonMemberUnschedulable, "learner %s cannot be scheduled", l.Name)
	case !r.Passed():
		return wait(ReasonLearnerCatchingUp, "learner %s is catching up: %s", l.Name, r.Reason)
	}
	return wait(ReasonLearnerCatchingUp, "learner %s's Pod is not ready", l.Name)
}

// joinRefused: the learner's etcd exited because no peer gave it the member list (etcd's own
// words, read by the data check); the wait says what the peers answered. While adopting, a source
// that refuses the learner's certificate would refuse any other learner the same way: that learner
// stays, counting for no quorum, past the learner timeout, and joins by itself once the source
// admits it (the kubelet keeps starting it), unless the user aborts. Anything else (no peer
// reached, Steward's own members refusing) gets the learner timeout's retry, which a learner on
// another node or with new certificates may pass.
func (v *view) joinRefused(l *memberView) Action {
	why := l.Pod.JoinRefused
	switch {
	case !evidence.PeerRefusedCertificate(why):
		return wait(ReasonLearnerRefused, "learner %s cannot join: no peer gave it the member list (%s): check that "+
			"its Pod reaches the peers' peer URLs", l.Name, why)
	case v.f.Adopting():
		return wait(ReasonLearnerRefused, "learner %s cannot join: the source's members refuse its peer certificate (%s). "+
			"They admit peers by name (--peer-cert-allowed-cn or --peer-cert-allowed-hostname): admit Steward's members "+
			"(their peer certificates name the member, e.g. CN %s) or abort the adoption (spec.bootstrap.join.abort: true). "+
			"The learner counts for no quorum and joins by itself once admitted", l.Name, why, l.Name)
	}
	return wait(ReasonLearnerRefused, "learner %s cannot join: the members refuse its peer certificate (%s)", l.Name, why)
}

// removals finish removals: out of etcd first (leader handed off before), then the Pod, then the
// data, then the member is finalized (scale-down) or reset to a fresh one (replacement).
//
// A removal the chokepoint refuses for now is kept aside (waiting) rather than returned, so the
// repair of another member, which is what the removal usually waits for, still runs.
func (v *view) removals() (_ Action, _ bool, waiting *Action) {
	for i := len(v.members) - 1; i >= 0; i-- {
		m := v.members[i]
		if !m.Deleting && m.Phase != stewardv1.MemberRemoving {
			continue
		}
		if m.ReplacedElsewhere != "" && !m.Deleting {
			return v.replacedElsewhere(m), true, waiting
		}
		if !m.inEtcd() {
			return v.cleanUp(m), true, waiting
		}
		if m.leader {
			return v.moveLeader(m, "removing it"), true, waiting
		}
		a, _ := v.disrupt(act(RemoveMember, m.Name, ReasonRemovingMember, "removing %s from etcd", m.Name), v.removalKind(m))
		if a.Kind == Wait {
			if waiting == nil {
				waiting = &a
			}
			continue
		}
		a.MemberID = m.id()
		return a, true, waiting
	}
	return Action{}, false, waiting
}

// removalKind: a member leaving for good shrinks the voter set; one removed to be replaced does not.
func (v *view) removalKind(m *memberView) disruption.Kind {
	if m.Deleting {
		return disruption.Remove
	}
	return disruption.Replace
}

// waitingRemoval reports the removal that waited for the cluster to heal, once nothing repairs it.
func (v *view) waitingRemoval(before notes) outcome {
	if before.removalWait == nil {
		return pass()
	}
	return decided(*before.removalWait)
}

// cleanUp removes what is left of a member that is out of etcd.
func (v *view) cleanUp(m *memberView) Action {
	switch {
	case m.Pod.Exists && m.Pod.Deleting:
		return v.terminating(m)
	case m.Pod.Exists:
		a, _ := v.disrupt(act(DeletePod, m.Name, ReasonCleaningUp, "deleting the Pod of removed member %s", m.Name),
			disruption.Restart)
		return a
	case m.PVC.Exists && m.PVC.Foreign:
		// Not ours to delete; it is not used by this member either.
	case m.PVC.Exists && m.PVC.Deleting:
		return wait(ReasonCleaningUp, "waiting for %s's PVC to go", m.Name)
	case m.PVC.Exists:
		a, _ := v.disrupt(act(DeletePVC, m.Name, ReasonCleaningUp, "deleting the stale data of removed member %s", m.Name),
			disruption.DeleteData)
		return a
	}
	if m.Deleting {
		return act(FinalizeMember, m.Name, ReasonScalingDown, "%s left etcd and its Pod and data are gone", m.Name)
	}
	return act(ResetMember, m.Name, ReasonCleaningUp, "%s left etcd; resetting it to join again as a fresh member", m.Name)
}

// orphanMembers removes live members no EtcdMember claims: the operator owns the membership.
func (v *view) orphanMembers() (Action, bool) {
	if len(v.orphans) == 0 {
		return Action{}, false
	}
	return v.removeOrphan(v.orphans[0]), true
}

func (v *view) removeOrphan(o health.Member) Action {
	name := orphanName(o.ID)
	if o.ID == v.leaderID && !o.IsLearner {
		from := &memberView{Member: &Member{Name: name}, live: &o, leader: true}
		return v.moveLeader(from, "removing it")
	}
	a, _ := v.disrupt(act(RemoveMember, name, ReasonRemovingUnknownMember,
		"member %x (%s) is in etcd but no EtcdMember claims it; removing it", o.ID, o.Name), disruption.Remove)
	a.MemberID = o.ID
	return a
}

// terminating waits for a member's Pod to go. A Pod stuck terminating (its node lost) blocks every
// step, and Steward never force-deletes it on a guess: a kubelet that is only cut off may still run
// etcd on the member's data. After a bounded time the wait says so, with the command a human runs
// once they have confirmed the node is gone.
func (v *view) terminating(m *memberView) Action {
	since := m.Pod.DeletingSince
	if !v.olderThan(since, v.lim.StuckTerminating) {
		return wait(ReasonWaitingForPodDeletion, "waiting for %s's Pod to terminate", m.Name)
	}
	return wait(ReasonPodStuckTerminating, "%s's Pod has been terminating for %s: its node may be lost. Steward never "+
		"force-deletes it; once you have confirmed the node is down (or its kubelet stopped), run: "+
		"kubectl delete pod %s -n %s --grace-period=0 --force", m.Name, v.f.Now.Sub(since).Round(time.Second),
		m.Name, v.f.Cluster.Namespace)
}
