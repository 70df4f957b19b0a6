package plan

import (
	"errors"

	"github.com/etcd-steward/steward/internal/disruption"
)

// step decides, or passes (false) to the next step in priority order.
type step func() (Action, bool)

// Plan decides the one next action from the facts, and what status should say.
func Plan(f Facts) Decision {
	v := newView(&f)
	a := v.decide()
	d := Decision{}
	if f.Cluster.Spec.Paused {
		next := a
		d.Next = &next
		a = wait(ReasonPaused, "spec.paused is set: no roll or scale step runs; next would be: %s", next)
	}
	if (d.Next != nil && d.Next.Kind == AdoptSpec) || a.Kind == AdoptSpec {
		// Status should already show the plan for the spec about to be adopted.
		v.setTarget(f.specTemplate())
	}
	a = v.tlsGate(a)
	a = v.imageGate(a)
	d.Action = a
	v.fillStatus(&d)
	return d
}

// decide walks the priority order of the design brief (invariant 3).
func (v *view) decide() Action {
	steps := []step{
		v.clusterDeleting,
		v.initialTarget,
		v.identity,
		v.bootstrap,
		v.dormant,
		v.quorumRecovery,
		v.quorumLost,
		v.defragInterrupted,
		v.restore,
		v.halfDone,
		v.corruption,
		v.adopt,
		v.repair,
		v.noSpace,
		v.pending,
		v.waitingRemoval,
		v.roll,
		v.scale,
		v.housekeeping,
		v.defragment,
		v.settle,
	}
	for _, s := range steps {
		if a, ok := s(); ok {
			return a
		}
	}
	return act(Nothing, "", ReasonReconciled, "every member runs the observed template and is healthy")
}

// tlsGate fails closed while TLS material is not ready: nothing that starts a Pod or takes a member
// down runs, since the Pod could not start (or would start on material that breaks
// authentication). A cluster with certificate work in flight is not reported as reconciled.
func (v *view) tlsGate(a Action) Action {
	t := v.f.TLS
	if t.Hold != "" && (a.Kind.StartsMember() || a.Disruption != nil || a.Kind == MoveLeader) {
		return wait(ReasonTLSHold, "%s waits for TLS material: %s", a, t.Hold)
	}
	if a.Kind == Nothing && t.Hold == "" && t.AwaitingClients {
		return wait(ReasonTLSClients, "%s", t.Pending)
	}
	if a.Kind == Nothing && (t.Hold != "" || t.Pending != "") {
		return wait(ReasonTLSPending, "%s", firstNonEmpty(t.Hold, t.Pending))
	}
	return a
}

// imageGate fails closed while the Steward image is unknown (Facts.ImageHold): a Pod started now
// would run etcd without the data check, and a Pod taken down could not be started again. A
// cluster with nothing to do still reports the hold: the next repair it needs would wait for it.
func (v *view) imageGate(a Action) Action {
	hold := v.f.ImageHold
	if hold == "" {
		return a
	}
	// A new member (CreateMember) is held too: it would only wait for its Pod as a Pending member.
	if a.Kind.StartsMember() || a.Kind == CreateMember || a.Disruption != nil || a.Kind == MoveLeader {
		return wait(ReasonImageUnknown, "%s waits for the Steward image: %s", a, hold)
	}
	if a.Kind == Nothing {
		return wait(ReasonImageUnknown, "no member Pod can be started: %s", hold)
	}
	return a
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

func (v *view) clusterDeleting() (Action, bool) {
	if v.f.Cluster.DeletionTimestamp == nil {
		return Action{}, false
	}
	// Teardown removes the whole cluster; members leave together, no MemberRemove one by one.
	return act(Nothing, "", ReasonClusterDeleting, "the cluster is being deleted"), true
}

func (v *view) initialTarget() (Action, bool) {
	if v.f.Cluster.Status.Observed != nil {
		return Action{}, false
	}
	return act(AdoptSpec, "", ReasonInitialTarget, "recording the first target template"), true
}

// adopt moves the target to the spec at a safe point, unless a member could not step to its version.
func (v *view) adopt() (Action, bool) {
	if v.f.specAdopted() || !v.safePoint() {
		return Action{}, false
	}
	if why := v.versionRefusal(); why != "" {
		v.adoptRefused = why
		return Action{}, false
	}
	return act(AdoptSpec, "", ReasonSpecChanged, "adopting the changed spec as the new target"), true
}

// adoptBeforeCreate adopts the spec before anything is built from the target, so nothing is created
// already outdated.
func (v *view) adoptBeforeCreate() (Action, bool) {
	return v.adopt()
}

// disrupt turns a disruption into an action, or into the reason it cannot happen now. A permanent
// refusal is returned as blocked=true so the caller can let a later step (a scale-out) proceed.
func (v *view) disrupt(a Action, kind disruption.Kind) (res Action, blocked bool) {
	err := v.check(kind, a.Member)
	if err == nil {
		return a.disrupting(kind), false
	}
	var r *disruption.Refusal
	if errors.As(err, &r) && r.Permanent() {
		return wait(ReasonBlocked, "%s is blocked (%s): %s", a.Kind, r.Reason, r.Detail), true
	}
	if errors.As(err, &r) && r.Reason == disruption.ReasonLearnerPresent {
		return wait(ReasonLearnerCatchUp, "%s waits: %s", a.Kind, r.Detail), false
	}
	return wait(ReasonWaitingForHealth, "%s waits: %v", a.Kind, err), false
}

// settle: nothing left to do, but the last step is only complete once the recovery gate passes
// (issue 5: completion is honest). Waiting, not Nothing, also makes the controller come back: etcd's
// recovery shows in no Kubernetes object it watches.
// A roll that is blocked until the user acts is a Wait too, with the reason.
func (v *view) settle() (Action, bool) {
	if r := v.gate(); !r.Passed() {
		return wait(ReasonWaitingForHealth, "waiting for the cluster to recover: %s", r), true
	}
	if v.rollBlocked != "" {
		return wait(ReasonBlocked, "%s", v.rollBlocked), true
	}
	// A spec not adopted yet is not done, though every member runs the target: status must not
	// say settled, and the wait comes back soon for what it waits on (a storage version).
	if v.adoptRefused != "" {
		return wait(ReasonVersionSkew, "the spec is not adopted yet: %s", v.adoptRefused), true
	}
	return Action{}, false
}
