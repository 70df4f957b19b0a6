package plan

import (
	"sort"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
)

// rollStep: a roll the chokepoint refuses for good passes with the refusal as a note (rollBlocked),
// so a scale-out that would make it possible still runs.
func (v *view) rollStep(notes) outcome {
	a, ok, blocked := v.roll()
	o := decidedIf(a, ok)
	o.fromTarget = ok && a.Kind == CreateMember // an add-first member is built from the target
	o.notes.rollBlocked = blocked
	return o
}

// roll brings one outdated member to the target template (issue 5). Pod metadata is patched in place
// first (no disruption); then the first member of the victim order is restarted (PVC) or replaced
// (memory) once the recovery gate passed, leadership handed off before the leader is touched.
// blocked says why the roll waits for the user.
func (v *view) roll() (_ Action, _ bool, blocked string) {
	if v.f.strategy() == stewardv1.OnDelete {
		return Action{}, false, "" // marked only: the user's Pod deletion triggers the rebuild (a repair)
	}
	for _, m := range v.active() {
		if v.kept(m) && m.Phase == stewardv1.MemberRunning && m.change.Has(ChangeMetadata) &&
			!m.change.Has(ChangeRoll) && m.Pod.Exists && !m.Pod.Deleting {
			return act(PatchPodMetadata, m.Name, ReasonPatchingPodMetadata, "patching %s's Pod labels and annotations in place", m.Name), true, ""
		}
	}
	if a, ok := v.recordInPlace(); ok {
		return a, true, ""
	}
	if a, ok := v.resize(); ok {
		return a, true, ""
	}
	order := v.rollOrder()
	if len(order) == 0 {
		return Action{}, false, ""
	}
	victim := order[0]
	if why := v.dataRefusal(victim); why != "" && !v.f.memory() {
		return wait(ReasonVersionStepRefused, "not rolling %s: %s", victim.Name, why), true, ""
	}
	kind, verb, k := disruption.Restart, "restarting", DeletePod
	switch {
	case victim.Pod.ImageOnly && victim.Pod.Exists && !victim.Pod.Deleting && !victim.TrustOutdated && !v.podBehind(victim):
		kind, verb, k = disruption.RestartContainer, "restarting in place (new image)", RestartContainer
	case v.f.memory():
		kind, verb, k = disruption.Replace, "replacing", RemoveMember
	}
	if kind == disruption.Replace {
		if v.surging() {
			return Action{}, false, "" // a member beyond spec.replicas is in: the scale step removes the surplus first
		}
		if a, ok := v.addFirst(victim); ok {
			return a, true, ""
		}
	}
	if v.voterCount() == 1 {
		return v.rollSingle(victim, kind)
	}
	if r := v.gate(victim.Name); !r.Passed() {
		return wait(ReasonWaitingForHealth, "rolling %s waits for the recovery gate: %s", victim.Name, r), true, ""
	}
	if victim.leader {
		return v.moveLeader(victim, "rolling it"), true, ""
	}
	onto := "the new template"
	switch {
	case v.onlyPodBehind(victim):
		onto = "the Pod this Steward version builds (its Pod was built by an older Steward)"
	case v.onlyCRLBehind(victim) && v.f.CRL:
		onto = "a Pod that checks client certificates against the revocation list (spec.auth)"
	case v.onlyCRLBehind(victim):
		onto = "a Pod without the revocation list (spec.auth removed)"
	}
	a, refused := v.disrupt(act(k, victim.Name, ReasonRollingMember, "%s %s onto %s", verb, victim.Name, onto), kind)
	if refused {
		return Action{}, false, a.Message
	}
	a.MemberID = victim.id()
	return a, true, ""
}

const singleNeedsDowntime = "a single member is rolled only with spec.updateStrategy.allowDowntime (a full " +
	"outage while it restarts), or after scaling to 3 members"

// rollSingle: the only member can be rolled only as an outage the user opted into, and never on
// memory storage, where its data would go with it. There is no one to ask for recovery, so no gate.
func (v *view) rollSingle(m *memberView, kind disruption.Kind) (_ Action, _ bool, blocked string) {
	if kind == disruption.RestartContainer {
		a, refused := v.disrupt(act(RestartContainer, m.Name, ReasonRollingMember, "restarting the only member %s in place "+
			"on the new image (allowDowntime)", m.Name), kind)
		if refused {
			return Action{}, false, singleNeedsDowntime
		}
		return a, true, ""
	}
	if v.f.memory() {
		return Action{}, false, "a single memory-backed member is never rolled: its data would be lost; scale to 3 members first"
	}
	a, refused := v.disrupt(act(DeletePod, m.Name, ReasonRollingMember, "restarting the only member %s (allowDowntime)", m.Name), kind)
	if refused {
		return Action{}, false, singleNeedsDowntime
	}
	return a, true, ""
}

func (v *view) voterCount() int {
	n := 0
	for _, l := range v.f.Etcd.Members {
		if !l.IsLearner {
			n++
		}
	}
	return n
}

// rollOrder is the victim order: outdated members that are failed or unready first (they are down
// anyway, and a roll may be what fixes them), then followers from the highest ordinal, the leader
// last. Members a pending scale-down removes are not rolled.
func (v *view) rollOrder() []*memberView {
	var out []*memberView
	for _, m := range v.active() {
		if v.kept(m) && m.Phase == stewardv1.MemberRunning && m.change.Has(ChangeRoll) {
			out = append(out, m)
		}
	}
	return v.byRollOrder(out)
}

// byRollOrder sorts members as the roll takes them (RollOrder).
func (v *view) byRollOrder(out []*memberView) []*memberView {
	SortForRoll(out, func(m *memberView) RollRank {
		return RollRank{Ordinal: m.Ordinal, Ready: m.readyVoter(), Leader: m.leader}
	})
	return out
}

// RollRank is what the roll order knows of a member.
type RollRank struct {
	Ordinal int32
	Ready   bool // a ready voter (readyVoter; status.members[].ready): members not ready go first
	Leader  bool
}

// SortForRoll sorts members (stably) as the roll takes them: members not ready first (they are
// down anyway, and the roll may be what fixes them), then followers from the highest ordinal down,
// the leader last. The planner and `kubectl etcd plan` both order by it.
func SortForRoll[T any](ms []T, rank func(T) RollRank) {
	group := func(r RollRank) int {
		switch {
		case !r.Ready:
			return 0
		case !r.Leader:
			return 1
		}
		return 2
	}
	sort.SliceStable(ms, func(i, j int) bool {
		ri, rj := rank(ms[i]), rank(ms[j])
		if gi, gj := group(ri), group(rj); gi != gj {
			return gi < gj
		}
		return ri.Ordinal > rj.Ordinal
	})
}

// recordInPlace records the target on a member whose Pod already runs it, changed in place (a
// container restarted on a new image; the Pod's template is patched with the image): the record is
// written after the Pod, so an operator stopped in between resumes here instead of restarting again.
func (v *view) recordInPlace() (Action, bool) {
	for _, m := range v.active() {
		if m.Phase != stewardv1.MemberRunning || !m.change.Has(ChangeRoll) || !m.Pod.Exists || m.Pod.Deleting ||
			m.Pod.Template == nil || m.TrustOutdated || v.podBehind(m) {
			continue
		}
		if Compare(*m.Pod.Template, v.target, v.f.medium())&^ChangeMetadata == 0 {
			return act(RecordTemplate, m.Name, ReasonRollingMember, "%s's Pod runs the new template: recording it", m.Name), true
		}
	}
	return Action{}, false
}

// onlyPodBehind: the member rolls only because an older Steward built its Pod (an operator upgrade);
// its template, trust and revocation list are current.
func (v *view) onlyPodBehind(m *memberView) bool {
	return v.olderSteward(m) && !v.crlBehind(m) && !m.TrustOutdated && !Compare(m.Template, v.target, v.f.medium()).Has(ChangeRoll)
}

// onlyCRLBehind: the member rolls only to start or stop checking the revocation list.
func (v *view) onlyCRLBehind(m *memberView) bool {
	return v.crlBehind(m) && !v.olderSteward(m) && !m.TrustOutdated && !Compare(m.Template, v.target, v.f.medium()).Has(ChangeRoll)
}
