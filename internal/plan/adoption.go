package plan

import (
	"fmt"
	"slices"
	"strconv"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/adoption"
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/health"
)

// Adoption (spec.bootstrap.join): Steward's members join a running cluster one at a time and each
// replaces a source member, so the cluster keeps its ID, data and revisions. While it lasts, the
// live members no EtcdMember claims are the source's (v.sources), never orphans: they count in the
// gate, the quorum and the disruption check like any voter, and only the hand-over removes them.

// SourceName names a source member in endpoints, the disruption view and actions; never a name
// Steward's own members take (those are <cluster>-<ordinal>).
func SourceName(m health.Member) string {
	if m.Name == "" {
		return fmt.Sprintf("source-%x", m.ID)
	}
	return "source-" + m.Name
}

func (f *Facts) join() *stewardv1.JoinSpec {
	if b := f.Cluster.Spec.Bootstrap; b != nil {
		return b.Join
	}
	return nil
}

func (f *Facts) recordedAdoption() stewardv1.AdoptionPhase {
	if a := f.Cluster.Status.Adoption; a != nil {
		return a.Phase
	}
	return ""
}

// Adopting: a joining cluster whose hand-over (or its abort) has not finished.
func (f *Facts) Adopting() bool {
	p := f.recordedAdoption()
	return f.join() != nil && p != stewardv1.AdoptionDone && p != stewardv1.AdoptionAborted
}

// abortingAdoption: abort asked for, or the cluster deleted, mid-adoption: Steward's members leave
// etcd one at a time, and the source is left as it was.
func (f *Facts) abortingAdoption() bool {
	return f.Adopting() && (f.join().Abort || f.Cluster.DeletionTimestamp != nil)
}

// HandOverStarted: something of the cluster changed already (a Steward member exists, or the
// recorded phase is past the preflight), so the preflight no longer decides. The controller asks it
// too: the preflight's live reads are made only until then.
func (f *Facts) HandOverStarted() bool {
	if len(f.Members) > 0 {
		return true
	}
	switch f.recordedAdoption() {
	case stewardv1.AdoptionHandingOver, stewardv1.AdoptionAborting:
		return true
	}
	return false
}

func (v *view) handOverStarted() bool { return v.f.HandOverStarted() }

// adoptionAborted: once aborted, the cluster's etcd is the source's alone. Nothing of it is
// Steward's to repair, recover or remove, so nothing runs until the EtcdCluster is deleted.
func (v *view) adoptionAborted() (Action, bool) {
	if v.f.join() == nil || v.f.recordedAdoption() != stewardv1.AdoptionAborted {
		return Action{}, false
	}
	return act(Nothing, "", ReasonAdoptionAborted, "the adoption was aborted and the source runs as it did: "+
		"Steward manages none of it; delete this EtcdCluster"), true
}

// handOver is the adoption step. It decides whenever the cluster is adopting, so nothing after it
// (a roll, a scale) runs until the hand-over is finished.
func (v *view) handOver(notes) outcome {
	if !v.f.Adopting() {
		return pass()
	}
	if !v.handOverStarted() && !v.f.abortingAdoption() {
		var checks []stewardv1.AdoptionCheck
		if v.f.Adoption != nil {
			checks = v.f.Adoption.Checks
		}
		if ok, why := adoption.Passed(checks); !ok {
			return decided(wait(ReasonAdoptionRefused, "%s", refusedMessage(why)))
		}
	}
	if !v.f.Etcd.MemberListKnown() {
		return decided(wait(ReasonWaitingForHealth, "the adoption waits for the member list: %s", v.f.Etcd.MemberListErr))
	}
	if v.f.abortingAdoption() {
		return decided(v.abortAdoption())
	}
	if !v.handOverStarted() {
		return decided(act(StartHandOver, "", ReasonHandingOver, "handing over: the preflight passed; recording that the hand-over starts"))
	}
	if a, ok := v.sourceStopping(); ok {
		return decided(a)
	}
	ours := 0
	for _, m := range v.active() {
		if !m.voter() {
			// One member on its way in at a time; pending (or halfDone, for a learner) brings it.
			if a, ok := v.pending(); ok {
				return decided(a)
			}
			return decided(wait(ReasonHandingOver, "%s is joining", m.Name))
		}
		ours++
	}
	switch adoption.Next(ours, len(v.sourceVoters()), v.f.replicas()) {
	case adoption.Add:
		if r := v.gate(); !r.Passed() {
			return decided(wait(ReasonWaitingForHealth, "adding a Steward member waits for the recovery gate: %s", r))
		}
		o := v.lowestFreeOrdinal()
		a := act(CreateMember, memberName(v.f, o), ReasonHandingOver, "handing over: adding Steward member %s (%d of %d; %d source members left)",
			memberName(v.f, o), ours+1, v.f.replicas(), len(v.sourceVoters()))
		a.Ordinal = o
		return built(a)
	case adoption.RemoveSource:
		return decided(v.removeSource())
	}
	return pass()
}

func refusedMessage(why string) string {
	return "the adoption is refused and nothing of the source was changed: " + why
}

func (v *view) sourceVoters() []*memberView {
	var out []*memberView
	for _, s := range v.sources {
		if s.voter() {
			out = append(out, s)
		}
	}
	return out
}

// removeSource removes the next source member from etcd, leadership moved to a Steward member
// first, through the chokepoint (which counts the source members like any voter).
func (v *view) removeSource() Action {
	if r := v.gate(); !r.Passed() {
		return wait(ReasonWaitingForHealth, "removing a source member waits for the recovery gate: %s", r)
	}
	victim := v.sourceVictim()
	if victim == nil {
		return wait(ReasonHandingOver, "no source member is left to remove")
	}
	if victim.leader {
		if v.leadershipTarget(victim, nil) == nil {
			if t := v.sourceLeadershipTarget(victim); t != nil {
				return moveLeaderAction(victim, t, "moving leadership from %s to source member %s "+
					"before removing it from etcd (no Steward member votes yet)", victim.Name, t.Name)
			}
		}
		return v.moveLeader(victim, "removing it from etcd")
	}
	a, _ := v.disrupt(act(RemoveMember, victim.Name, ReasonHandingOver, "handing over: removing source member %s from etcd",
		victim.live.Name), disruption.Remove)
	if a.Kind == RemoveMember {
		a.MemberID = victim.id()
	}
	return a
}

// sourceLeadershipTarget: before any Steward member votes (a larger source's spare members leave
// first), leadership goes to the healthy source voter that leaves last, so it moves once.
func (v *view) sourceLeadershipTarget(victim *memberView) *memberView {
	var best *memberView
	for _, s := range v.sourceVoters() {
		if s == victim || !s.healthy() {
			continue
		}
		if best == nil || v.removedBefore(best, s) {
			best = s
		}
	}
	return best
}

// removedBefore: a leaves etcd before b in the hand-over's order.
func (v *view) removedBefore(a, b *memberView) bool {
	key := func(m *memberView) string {
		if p := v.sourcePod(*m.live); p != "" {
			return p
		}
		return m.live.Name
	}
	ka, kb := key(a), key(b)
	return ka != kb && adoption.RemovalOrder([]string{ka, kb})[0] == ka
}

// sourceVictim: the source voter whose StatefulSet Pod has the highest ordinal (a StatefulSet
// scales down from there), else the highest etcd name.
func (v *view) sourceVictim() *memberView {
	byKey := map[string]*memberView{}
	var keys []string
	for _, s := range v.sourceVoters() {
		key := s.live.Name
		if p := v.sourcePod(*s.live); p != "" {
			key = p
		}
		byKey[key] = s
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil
	}
	return byKey[adoption.RemovalOrder(keys)[0]]
}

// sourcePod is the StatefulSet Pod that runs a source member: as recorded, else matched now.
func (v *view) sourcePod(m health.Member) string {
	if rec := v.f.Cluster.Status.Adoption; rec != nil {
		for _, s := range rec.SourceMembers {
			if s.ID == strconv.FormatUint(m.ID, 16) && s.Pod != "" {
				return s.Pod
			}
		}
	}
	set := v.sourceSet()
	if set == nil {
		return ""
	}
	var pods []string
	for _, p := range set.Pods {
		pods = append(pods, p.Name)
	}
	for _, u := range m.PeerURLs {
		if p := adoption.PodOf(u, pods); p != "" {
			return p
		}
	}
	return ""
}

func (v *view) sourceSet() *SourceSet {
	if v.f.Adoption == nil || v.f.Adoption.StatefulSet == nil || !v.f.Adoption.StatefulSet.Found {
		return nil
	}
	return v.f.Adoption.StatefulSet
}

// sourceStopping: a source member that left etcd is stopped before the next one leaves. Its Pod
// is the StatefulSet's highest (removal goes in that order): the StatefulSet is scaled down by one,
// then the Pod is awaited. Only Pods recorded as running a source member are considered, so a Pod
// someone else added is never scaled away.
func (v *view) sourceStopping() (Action, bool) {
	set := v.sourceSet()
	if set == nil {
		return Action{}, false
	}
	serving := map[string]bool{}
	for _, s := range v.sources {
		if p := v.sourcePod(*s.live); p != "" {
			serving[p] = true
		}
	}
	removed := map[string]bool{}
	if rec := v.f.Cluster.Status.Adoption; rec != nil {
		for _, s := range rec.SourceMembers {
			if s.Pod != "" && !serving[s.Pod] {
				removed[s.Pod] = true
			}
		}
	}
	if len(set.Pods) == 0 {
		return Action{}, false
	}
	// The highest Pod: if it still serves (or is not the source's), there is nothing to stop.
	p := slices.MaxFunc(set.Pods, func(a, b SourcePod) int { return adoption.Ordinal(a.Name) - adoption.Ordinal(b.Name) })
	if !removed[p.Name] {
		return Action{}, false
	}
	if ord := int32(adoption.Ordinal(p.Name)); ord >= 0 && set.Replicas > ord {
		a := act(ScaleSource, "", ReasonHandingOver, "handing over: scaling StatefulSet %s from %d to %d replicas: %s's member left etcd",
			set.Name, set.Replicas, ord, p.Name)
		a.SourceReplicas = ord
		return a, true
	}
	return wait(ReasonHandingOver, "waiting for source Pod %s to stop (StatefulSet %s at %d replicas)", p.Name, set.Name, set.Replicas), true
}

// abortAdoption takes Steward's members out, highest ordinal first, each through the scale-down
// flow (leadership handed to a source member first). Once the last source member has left etcd
// there is nothing to go back to: the abort does nothing, and the cluster is Steward's.
func (v *view) abortAdoption() Action {
	if len(v.sourceVoters()) == 0 && v.handOverStarted() {
		return act(Nothing, "", ReasonHandingOver, "abort does nothing: the last source member already left etcd; the cluster is Steward's")
	}
	if gone := v.sourcesGone(); gone > 0 && v.f.Cluster.DeletionTimestamp == nil {
		// A removed member cannot rejoin on its old data, so the source cannot be given back as it
		// was; taking Steward's members out now would only leave the cluster smaller than either.
		return wait(ReasonBlocked, "abort cannot give the source back: %d of its members already left etcd and cannot rejoin. "+
			"The hand-over holds here; set spec.bootstrap.join.abort to false to go on, or delete the EtcdCluster to take "+
			"Steward's members out one at a time (the source keeps the %d members it has)", gone, len(v.sourceVoters()))
	}
	for _, m := range v.members {
		if m.Deleting {
			return wait(ReasonAbortingAdoption, "aborting the adoption: removing Steward member %s", m.Name)
		}
	}
	active := v.active()
	if len(active) == 0 {
		return act(Nothing, "", ReasonAdoptionAborted, "the adoption was aborted: no Steward member is left; the source runs as it did")
	}
	victim := active[len(active)-1]
	if victim.leader {
		return v.moveLeaderToSource(victim)
	}
	a, blocked := v.disrupt(act(DeleteMember, victim.Name, ReasonAbortingAdoption, "aborting the adoption: removing Steward member %s",
		victim.Name), disruption.Remove)
	if blocked || a.Kind == Wait {
		return a
	}
	// As a scale-down: deleting the object is the intent; MemberRemove follows in its finalizer
	// flow, through the chokepoint.
	a.Disruption = nil
	a.MemberID = victim.id()
	return a
}

// sourcesGone counts the recorded source members that have left etcd.
func (v *view) sourcesGone() int {
	n := 0
	if rec := v.f.Cluster.Status.Adoption; rec != nil {
		live := map[string]bool{}
		for _, s := range v.sources {
			live[strconv.FormatUint(s.id(), 16)] = true
		}
		for _, s := range rec.SourceMembers {
			if !live[s.ID] {
				n++
			}
		}
	}
	return n
}

func (v *view) moveLeaderToSource(m *memberView) Action {
	for _, s := range v.sourceVoters() {
		if s.healthy() && v.caughtUp(s) {
			return moveLeaderAction(m, s, "moving leadership from %s to source member %s before removing it", m.Name, s.live.Name)
		}
	}
	return wait(ReasonNoLeadershipTarget, "%s leads and no source member is healthy to take over", m.Name)
}
