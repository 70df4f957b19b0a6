package plan

import (
	"slices"
)

// Add-first replacement of memory members (issue 30). A memory member cannot restart: its data
// lives in its Pod, so rolling it means replacing it by a fresh member that copies the data from
// the others. Remove-first leaves a 3-member cluster at 2 voters while the learner catches up, and
// one more fault then loses the data for good. With a surge (spec.updateStrategy.maxSurge, 1 by
// default for memory) a healthy outdated member is replaced add-first:
//
//  1. the roll creates a member on the target under the lowest free ordinal (names move on:
//     web-0,1,2 become web-0,1,3, then web-0,2,3, ...);
//  2. the join flow adds it as a learner, starts its Pod and promotes it once it caught up (a
//     learner holds every disruption: the chokepoint refuses them while one exists);
//  3. with one member more than spec.replicas, the scale step removes the surplus: outdated
//     members first, in the roll's order (the leader last, its leadership moved first), through the
//     removal flow and the chokepoint, which counts the surge member among the voters.
//
// Every step is decided from what exists (a member object beyond spec.replicas is the surge), so
// an operator that stops between two steps resumes where it was.
//
// etcd refuses a member add while the grown cluster would lack a connected quorum (3.5.30+ and
// 3.6.11+ count the connected voters of n+1), so add-first is for healthy members only: an outdated
// member that is down is replaced remove-first, as a failed one is (repair).

// maxSurge is how many members the roll may add beyond spec.replicas (EtcdClusterSpec.MaxSurge).
func (f *Facts) maxSurge() int { return f.Cluster.Spec.MaxSurge() }

// surplus are the active members a scale-in removes, first to go first: beyond spec.replicas, the
// highest ordinals (PVC members: their PVCs keep their names). On memory storage drained members go
// first (the earliest eviction request first: their successor was added for them), then outdated
// members in the roll's order: they would each need a replacement anyway, and after an add-first
// surge the outdated member is what has to leave, not the member just added.
func (v *view) surplus() []*memberView {
	active := v.active()
	n := len(active) - v.f.replicas()
	if n <= 0 {
		return nil
	}
	if !v.f.memory() {
		out := slices.Clone(active[len(active)-n:])
		slices.Reverse(out)
		return out
	}
	var drained, outdated, current []*memberView
	for i := len(active) - 1; i >= 0; i-- {
		switch m := active[i]; {
		case v.evictionRequested(m):
			drained = append(drained, m)
		case m.change.Has(ChangeRoll):
			outdated = append(outdated, m)
		default:
			current = append(current, m)
		}
	}
	slices.SortFunc(drained, byEvictionRequest)
	return slices.Concat(drained, v.byRollOrder(outdated), current)[:n]
}

// surging: a memory cluster runs more members than spec.replicas (an add-first surge, or a
// scale-in to finish): the scale step removes the surplus before the roll replaces anyone else.
func (v *view) surging() bool {
	return v.f.memory() && len(v.active()) > v.f.replicas()
}

// addFirst is the roll's first half of an add-first replacement of victim: a member on the
// target, created beside it. It does not apply (ok false: the roll replaces remove-first) when
// the surge is 0, the victim is not a ready voter (a member that is down cannot be added beside:
// etcd would refuse the add), or a single voter is rolled (never, for memory: rollSingle says so).
// A ready victim waits for the whole cluster's gate, itself included: the add needs every voter.
func (v *view) addFirst(victim *memberView) (_ Action, ok bool) {
	return v.addBeside(victim, ReasonRollingMember, "")
}

// addBeside creates victim's successor on the target (addFirst); forWhat says in the messages what
// the replacement is for ("" for a roll, " for its eviction" for a drain).
func (v *view) addBeside(victim *memberView, reason Reason, forWhat string) (_ Action, ok bool) {
	if !v.f.memory() || v.f.maxSurge() == 0 || !victim.readyVoter() || v.voterCount() < 2 {
		return Action{}, false
	}
	if r := v.gate(); !r.Passed() {
		return wait(ReasonWaitingForHealth, "replacing %s add-first%s waits for the recovery gate: %s", victim.Name, forWhat, r), true
	}
	ord := v.lowestFreeOrdinal()
	a := act(CreateMember, memberName(v.f, ord), reason, "replacing %s add-first%s: creating member #%d on the "+
		"target template; %s is removed once it votes (spec.updateStrategy.maxSurge)", victim.Name, forWhat, ord, victim.Name)
	a.Ordinal = ord
	return a, true
}

// addFirstSurplus: m leaves as the second half of an add-first replacement: an outdated memory
// member, no more members beyond spec.replicas than the surge allows, and one of them on the
// target (a scale-in of outdated members with none on the target is a scale-in).
func (v *view) addFirstSurplus(m *memberView) bool {
	if !v.f.memory() || !m.change.Has(ChangeRoll) || len(v.active())-v.f.replicas() > v.f.maxSurge() {
		return false
	}
	for _, o := range v.active() {
		if !o.change.Has(ChangeRoll) {
			return true
		}
	}
	return false
}

// surplusReason is why the scale step removes m: an add-first replacement finishing (an outdated
// memory member while a surge member is in), or a scale-in.
func (v *view) surplusReason(m *memberView) (Reason, string) {
	if v.f.memory() && v.evictionRequested(m) && len(v.active())-v.f.replicas() <= v.f.maxSurge() {
		return ReasonPreparingEviction, "replacing " + m.Name + " add-first for its eviction: its successor votes; removing it"
	}
	if v.addFirstSurplus(m) {
		return ReasonRollingMember, "replacing " + m.Name + " add-first: its successor votes; removing it"
	}
	return ReasonScalingDown, "scaling down: removing " + m.Name
}

// byEvictionRequest orders drained members as the eviction step takes them: the earliest request
// first, the lowest ordinal among requests of the same instant.
func byEvictionRequest(a, b *memberView) int {
	if c := a.Pod.EvictionRequested.Compare(b.Pod.EvictionRequested); c != 0 {
		return c
	}
	return int(a.Ordinal - b.Ordinal)
}
