package plan

import (
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/eviction"
)

// eviction prepares a member whose eviction Kubernetes was asked for (a node drain; the eviction
// webhook recorded the request on its Pod and answers 429 until the member is prepared): leadership
// moves off it, then it leaves the client Service through the chokepoint (disruption.Evict), after
// the recovery gate passed. One member at a time: while one is prepared and not evicted yet,
// nothing else is disrupted (it counts as disrupted, see evicting) and this step waits for
// Kubernetes. Repairs come first (the steps before), so a member is never prepared while another is
// down; the webhook lets the eviction through to the PodDisruptionBudget after its bound anyway. A
// single member is never prepared: the budget decides alone.
func (v *view) eviction() (Action, bool) {
	var victim *memberView
	for _, m := range v.members {
		if !v.evictionRequested(m) {
			continue
		}
		if m.Pod.EvictionPrepared {
			if m.leader {
				return v.moveLeader(m, "its eviction"), true
			}
			return wait(ReasonWaitingForEviction, "%s is prepared for its eviction (leadership moved, out of the client Service): "+
				"waiting for Kubernetes to evict it", m.Name), true
		}
		if victim == nil || byEvictionRequest(m, victim) < 0 {
			victim = m
		}
	}
	if victim == nil || !victim.voter() || v.voterCount() < 2 {
		return Action{}, false
	}
	if v.f.memory() && v.f.maxSurge() > 0 {
		// A drained memory member is a planned move of a healthy member: replaced add-first (its
		// successor created and voting before it is removed, which deletes its Pod and ends the
		// eviction). While the successor is in, the scale step removes the drained member: drained
		// members lead the surplus.
		if v.surging() {
			return Action{}, false
		}
		if a, ok := v.addBeside(victim, ReasonPreparingEviction, " for its eviction"); ok {
			return a, true
		}
	}
	if r := v.gate(victim.Name); !r.Passed() {
		return wait(ReasonWaitingForHealth, "preparing %s for its eviction waits for the recovery gate: %s", victim.Name, r), true
	}
	if victim.leader {
		return v.moveLeader(victim, "its eviction"), true
	}
	a, blocked := v.disrupt(act(PrepareEviction, victim.Name, ReasonPreparingEviction,
		"preparing %s for its eviction: out of the client Service", victim.Name), disruption.Evict)
	if blocked {
		return Action{}, false
	}
	a.MemberID = victim.id()
	return a, true
}

// evictionRequested: an eviction of the member's running Pod was asked for, and the request is live.
func (v *view) evictionRequested(m *memberView) bool {
	return m.Pod.Exists && !m.Pod.Deleting && eviction.Live(m.Pod.EvictionRequested, v.f.Now)
}

// evicting: the member was prepared for its eviction and Kubernetes has not evicted it yet; it
// serves no new client, so it counts as disrupted (invariant 1) until its Pod is gone and back.
func (v *view) evicting(m *memberView) bool {
	return m.Pod.EvictionPrepared && v.evictionRequested(m)
}
