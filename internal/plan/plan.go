package plan

import (
	"errors"

	"github.com/etcd-steward/steward/internal/disruption"
)

// Plan decides the one next action from the facts, and what status should say. The steps decide
// (steps.go); then the filters below, in this order and nowhere else, may turn the action into a
// wait: spec.paused, the TLS gate, the image gate.
func Plan(f Facts) Decision {
	v := newView(&f)
	a, n := v.decide()
	n.adoptRefused = v.adoptionRefusal()
	d := Decision{}
	a = v.pauseFilter(a, &d)
	if (d.Next != nil && d.Next.Kind == AdoptSpec) || a.Kind == AdoptSpec {
		// Status should already show the plan for the spec about to be adopted.
		v.setTarget(f.specTemplate())
	}
	a = v.tlsGate(a)
	a = v.imageGate(a)
	d.Action = a
	v.fillStatus(&d, n)
	return d
}

// pauseFilter: spec.paused stops every action; status shows the one that would run next.
func (v *view) pauseFilter(a Action, d *Decision) Action {
	if !v.f.Cluster.Spec.Paused {
		return a
	}
	next := a
	d.Next = &next
	return wait(ReasonPaused, "spec.paused is set: no roll or scale step runs; next would be: %s", next)
}

// tlsGate fails closed while TLS material is not ready: nothing that starts a Pod or takes a member
// down runs, since the Pod could not start (or would start on material that breaks
// authentication). A cluster with certificate work in flight is not reported as reconciled.
func (v *view) tlsGate(a Action) Action {
	t := v.f.TLS
	if t.Hold != "" && (a.Kind.StartsMember() || a.Disruption != nil || a.Kind == MoveLeader) {
		return wait(ReasonTLSMaterialNotReady, "%s waits for TLS material: %s", a, t.Hold)
	}
	if a.Kind == Nothing && t.Hold == "" && t.AwaitingClients {
		return wait(ReasonWaitingForClientRestart, "%s", t.Pending)
	}
	if a.Kind == Nothing && (t.Hold != "" || t.Pending != "") {
		return wait(ReasonCertificatesInProgress, "%s", firstNonEmpty(t.Hold, t.Pending))
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
		return wait(ReasonStewardImageUnknown, "%s waits for the Steward image: %s", a, hold)
	}
	if a.Kind == Nothing {
		return wait(ReasonStewardImageUnknown, "no member Pod can be started: %s", hold)
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
	if v.f.abortingAdoption() {
		// Mid-adoption the source still serves: Steward's members leave etcd one at a time before
		// the teardown, exactly as for abort (the controller holds the teardown meanwhile).
		if a, ok, _ := v.halfDoneMembership(); ok {
			return a, true
		}
		return v.handOver(notes{}).action, true
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
	if v.adoptionRefusal() != "" {
		return Action{}, false
	}
	return act(AdoptSpec, "", ReasonSpecChanged, "adopting the changed spec as the new target"), true
}

// adoptionRefusal says why the spec cannot be adopted now although it differs from the target and
// nothing is in flight: a member could not take its version step. "" when it can, or when adoption
// is not due (adopted already, or not at a safe point).
func (v *view) adoptionRefusal() string {
	if v.f.specAdopted() || !v.safePoint() {
		return ""
	}
	return v.versionRefusal()
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
		return wait(ReasonLearnerCatchingUp, "%s waits: %s", a.Kind, r.Detail), false
	}
	return wait(ReasonWaitingForHealth, "%s waits: %v", a.Kind, err), false
}

// settle: nothing left to do, but the last step is only complete once the recovery gate passes
// (issue 5: completion is honest). Waiting, not Nothing, also makes the controller come back: etcd's
// recovery shows in no Kubernetes object it watches.
// A roll that is blocked until the user acts is a Wait too, with the reason.
func (v *view) settle(before notes) outcome {
	if before.nodeLossWait != nil {
		return decided(*before.nodeLossWait)
	}
	if r := v.gate(); !r.Passed() {
		return decided(wait(ReasonWaitingForHealth, "waiting for the cluster to recover: %s", r))
	}
	if before.rollBlocked != "" {
		return decided(wait(ReasonBlocked, "%s", before.rollBlocked))
	}
	// A spec not adopted yet is not done, though every member runs the target: status must not
	// say settled, and the wait comes back soon for what it waits on (a storage version).
	if why := v.adoptionRefusal(); why != "" {
		return decided(wait(ReasonVersionStepRefused, "the spec is not adopted yet: %s", why))
	}
	return pass()
}
