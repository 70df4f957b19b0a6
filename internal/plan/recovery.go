package plan

import (
	"fmt"
	"slices"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/evidence"
)

// continueRecovery takes the next step of the recovery in progress, after judging the evidence
// again on this reconcile's live reads (a recovery started on evidence that has gone is abandoned
// while that can still be done without loss).
func (v *view) continueRecovery(p *stewardv1.QuorumRecoveryProgress) Action {
	s := v.member(p.Survivor)
	if why := v.recoveryAbort(p); why != "" {
		return act(AbortRecovery, p.Survivor, ReasonQuorumRecoveryAborted, "quorum recovery aborted before changing any data: %s", why)
	}
	if p.RestoreFrom != "" {
		return v.continueRestore(p)
	}
	if s == nil {
		return wait(ReasonRecoveringQuorum, "quorum recovery: the survivor %s is gone; restore from a backup", p.Survivor)
	}
	switch p.Stage {
	case stewardv1.RecoveryFencing:
		return v.fence(p)
	case stewardv1.RecoveryForceNewCluster:
		return v.forceNewCluster(s)
	case stewardv1.RecoveryRestarting:
		return v.restartSurvivor(s)
	}
	return v.discard(p)
}

func (v *view) member(name string) *memberView {
	for _, m := range v.members {
		if name != "" && m.Name == name {
			return m
		}
	}
	return nil
}

// recoveryAbortable: nothing irreversible has happened yet. Once the survivor's Pod was built with
// --force-new-cluster it may have rewritten its membership, and only finishing the recovery is
// safe; a restore from a backup is past return once its members are dropped.
func (v *view) recoveryAbortable(p *stewardv1.QuorumRecoveryProgress) bool {
	if p.RestoreFrom != "" {
		return p.Stage == stewardv1.RecoveryFencing
	}
	switch p.Stage {
	case stewardv1.RecoveryFencing:
		return true
	case stewardv1.RecoveryForceNewCluster:
		s := v.member(p.Survivor)
		return s == nil || !s.Pod.Exists || !s.Pod.ForceNewCluster
	}
	return false
}

// recoveryAbort says why the recovery in progress stops now, or "": etcd shows quorum again, or
// (when Steward chose the survivor) another member that answers holds more of the log.
func (v *view) recoveryAbort(p *stewardv1.QuorumRecoveryProgress) string {
	if !v.recoveryAbortable(p) {
		return ""
	}
	if q := v.quorumEvidence(); q.State == evidence.Held {
		return q.Summary(v.order())
	}
	s := v.member(p.Survivor)
	if s == nil || s.ep == nil || !s.ep.Reachable || (p.Trigger != "auto" && p.Trigger != TriggerAutomatic) {
		return ""
	}
	for _, m := range v.active() {
		if m != s && v.canSurvive(m) && m.ep.RaftIndex > s.ep.RaftIndex {
			return fmt.Sprintf("%s (raft index %d) holds more of the log than the survivor %s (raft index %d)",
				m.Name, m.ep.RaftIndex, s.Name, s.ep.RaftIndex)
		}
	}
	return ""
}

// quorumShown: etcd shows quorum while a recovery could still be abandoned. The chokepoint refuses
// to fence on it, on its own fresh read right before it acts.
func (v *view) quorumShown() bool {
	p := v.recoveryInProgress()
	return p != nil && v.recoveryAbortable(p) && v.quorumEvidence().State == evidence.Held
}

// fence: every other member's Pod is gone (not terminating) before the survivor forms a new cluster;
// etcd panics when members of the old cluster are still alive.
func (v *view) fence(p *stewardv1.QuorumRecoveryProgress) Action {
	if a, fencing := v.fenceAllBut(p.Survivor, "(deleting its Pod; its PVC stays)"); fencing {
		return a
	}
	return recoveryStep(p.Survivor, stewardv1.RecoveryForceNewCluster, "quorum recovery: every other member is fenced; "+
		"starting %s with --force-new-cluster", p.Survivor)
}

// fenceAllBut deletes the Pod of every member but keep, the next one each call, without waiting for
// one to terminate before deleting the next: quorum is lost, so no member serves and staggering
// protects nothing, while each Pod may take its whole grace period to go. Then it waits until every
// one is gone (the kubelet confirmed termination; never forced). what goes in the action's message
// after the member's name. false: nothing is left to fence.
func (v *view) fenceAllBut(keep, what string) (Action, bool) {
	terminating := ""
	for _, m := range v.members {
		switch {
		case m.Name == keep || !m.Pod.Exists:
		case m.Pod.Deleting:
			if terminating == "" {
				terminating = m.Name
			}
		default:
			a, _ := v.disrupt(act(DeletePod, m.Name, ReasonFencingMember, "quorum recovery: fencing %s %s", m.Name, what), disruption.Fence)
			return a, true
		}
	}
	if terminating != "" {
		return wait(ReasonRecoveringQuorum, "quorum recovery: fencing, waiting for %s's Pod to be gone", terminating), true
	}
	return Action{}, false
}

// forceNewCluster: the survivor's Pod is recreated, once, with --force-new-cluster; when it serves
// as the only voter, the next stage restarts it without the flag.
func (v *view) forceNewCluster(s *memberView) Action {
	switch {
	case s.Pod.Exists && s.Pod.Deleting:
		return wait(ReasonRecoveringQuorum, "quorum recovery: waiting for %s's Pod to stop", s.Name)
	case s.Pod.Exists && !s.Pod.ForceNewCluster:
		a, _ := v.disrupt(act(DeletePod, s.Name, ReasonRecoveringQuorum, "quorum recovery: restarting %s to start it with --force-new-cluster", s.Name),
			disruption.Fence)
		return a
	case !s.Pod.Exists:
		a := act(CreatePod, s.Name, ReasonRecoveringQuorum, "quorum recovery: starting %s with --force-new-cluster", s.Name)
		a.ForceNewCluster = true
		return a
	case v.servesAlone(s):
		return recoveryStep(s.Name, stewardv1.RecoveryRestarting, "quorum recovery: %s serves as a one-member cluster; "+
			"restarting it without --force-new-cluster", s.Name)
	}
	return wait(ReasonRecoveringQuorum, "quorum recovery: waiting for %s to serve as a one-member cluster", s.Name)
}

// restartSurvivor: the flag must not stay on the Pod (a container restart would force a new
// cluster again once members have joined), so the Pod is recreated without it.
func (v *view) restartSurvivor(s *memberView) Action {
	switch {
	case s.Pod.Exists && s.Pod.Deleting:
		return wait(ReasonRecoveringQuorum, "quorum recovery: waiting for %s's Pod to stop", s.Name)
	case s.Pod.Exists && s.Pod.ForceNewCluster:
		a, _ := v.disrupt(act(DeletePod, s.Name, ReasonRecoveringQuorum, "quorum recovery: restarting %s without --force-new-cluster", s.Name),
			disruption.Fence)
		return a
	case !s.Pod.Exists:
		return act(CreatePod, s.Name, ReasonRecoveringQuorum, "quorum recovery: starting %s without --force-new-cluster", s.Name)
	case v.servesAlone(s) && s.ep.ReadOK:
		return recoveryStep(s.Name, stewardv1.RecoveryDiscarding, "quorum recovery: %s serves; dropping the other members", s.Name)
	}
	return wait(ReasonRecoveringQuorum, "quorum recovery: waiting for %s to serve again", s.Name)
}

func (v *view) servesAlone(s *memberView) bool {
	return s.voter() && v.voterCount() == 1 && s.ep != nil && s.ep.Healthy && len(v.f.Etcd.Members) == 1
}

// discard drops the other members one by one (their PVCs detached and kept), then finishes.
func (v *view) discard(p *stewardv1.QuorumRecoveryProgress) Action {
	for _, m := range v.members {
		if slices.Contains(p.Discarded, m.Name) {
			return act(DiscardMember, m.Name, ReasonRecoveringQuorum, "quorum recovery: dropping %s (its PVC is kept, detached)", m.Name)
		}
	}
	return act(FinishRecovery, p.Survivor, ReasonQuorumRecovered, "quorum recovered from %s; the cluster regrows to %d members",
		p.Survivor, v.f.replicas())
}

// continueRestore: fence every member, drop them all, then clear the old cluster's identity so the
// seed bootstraps anew from the backup (bootstrap, which comes before this step, does that while
// the cluster has not formed); done once a voter of the new cluster serves.
func (v *view) continueRestore(p *stewardv1.QuorumRecoveryProgress) Action {
	switch p.Stage {
	case stewardv1.RecoveryFencing:
		if a, fencing := v.fenceAllBut("", "(deleting its Pod)"); fencing {
			return a
		}
		return recoveryStep("", stewardv1.RecoveryDiscarding, "quorum recovery: every member is fenced; dropping them to rebuild from backup %s", p.RestoreFrom)
	case stewardv1.RecoveryDiscarding:
		for _, m := range v.members {
			return act(DiscardMember, m.Name, ReasonRecoveringQuorum, "quorum recovery: dropping %s (its PVC is kept, detached)", m.Name)
		}
		return recoveryStep("", stewardv1.RecoveryReseeding, "quorum recovery: seeding a new cluster from backup %s", p.RestoreFrom)
	}
	for _, m := range v.members {
		if m.voter() && m.healthy() && m.ep.ReadOK {
			return act(FinishRecovery, m.Name, ReasonQuorumRecovered, "quorum recovered from backup %s; the cluster regrows to %d members",
				p.RestoreFrom, v.f.replicas())
		}
	}
	return wait(ReasonRecoveringQuorum, "quorum recovery: waiting for the seed restored from backup %s to serve", p.RestoreFrom)
}

func recoveryStep(survivor string, stage stewardv1.QuorumRecoveryStage, format string, args ...any) Action {
	a := act(RecoveryStep, survivor, ReasonRecoveringQuorum, format, args...)
	a.Stage = stage
	return a
}
