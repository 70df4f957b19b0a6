package plan

import (
	"k8s.io/apimachinery/pkg/api/equality"

	"context"

	"k8s.io/apimachinery/pkg/api/resource"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
)

func (w *world) observed() stewardv1.MemberTemplate { return *w.cluster.Status.Observed.DeepCopy() }

func (w *world) ensurePVC(m *wMember) {
	if w.memory() || m.pvc != nil {
		return
	}
	size := *w.observed().Storage.Size
	m.pvc = &wPVC{requested: size.DeepCopy(), capacity: size.DeepCopy()}
}

// apply carries out an action the way the controller would, including its intent-first writes. With
// crashRate > 0 an action may stop half-way (after the intent, or after the etcd call but before the
// status write), as if the operator died there.
func (w *world) apply(f Facts, a Action) {
	if !a.Acts() {
		return
	}
	crash := w.rng.Float64() < w.crashRate
	early := crash && w.rng.Intn(2) == 0
	if crash {
		switch a.Kind {
		case AddLearner, CreatePod, PromoteLearner, RemoveMember:
			w.crashes++
		}
	}
	if (a.Disruption != nil) != a.Kind.Disrupts() {
		w.violate("%s: its Disruption (%v) does not match its kind", a, a.Disruption)
	}
	m := w.member(a.Member)
	// As the controller: a kind that needs its EtcdMember meets NotFound without it, unless it names
	// an etcd member no EtcdMember claims.
	if a.Kind.NeedsMember() && m == nil && !(a.MemberID != 0 && a.Kind.OrphanAllowed()) {
		w.staleOr("%s names unknown member %q", a.Kind, a.Member) // NotFound from the API server
		return
	}
	// Every kind is named (the exhaustive linter holds this switch to Kinds()), so a kind the
	// planner can return cannot be missing from the world.
	//exhaustive:enforce
	switch a.Kind {
	case Nothing, Wait:
	case AdoptSpec:
		w.cluster.Status.Observed = w.cluster.Spec.MemberTemplate.DeepCopy()
	case CreateMember:
		if w.member(a.Member) != nil {
			w.staleOr("CreateMember %s: it exists", a.Member) // the API server answers AlreadyExists
			return
		}
		w.members = append(w.members, &wMember{name: a.Member, ordinal: a.Ordinal, phase: stewardv1.MemberPending, template: w.observed()})
		w.sortMembers()
	case BootstrapSeed:
		if len(w.etcd) > 0 {
			w.violate("BootstrapSeed %s on a formed cluster", m.name)
		}
		m.template = w.observed()
		w.ensurePVC(m)
		m.pod = &wPod{template: m.template, bootstrap: true, uid: w.newUID(), revision: w.podRevision, crl: w.crl}
	case AddLearner:
		w.addLearner(m, crash, early)
	case CreatePod:
		m.template = w.observed()
		if early {
			return
		}
		if m.pod != nil {
			// The template is recorded first; the create meets AlreadyExists: the old Pod runs on.
			w.staleOr("CreatePod %s: a Pod exists", m.name)
			return
		}
		w.ensurePVC(m)
		m.pod = &wPod{template: m.template, unschedulable: w.unschedulable[m.name], uid: w.newUID(),
			revision: w.podRevision, crl: w.crl, ev: evidencePod{forceNew: a.ForceNewCluster}}
		w.events = append(w.events, event{step: w.step, kind: CreatePod, member: m.name, ordinal: m.ordinal, reason: a.Reason})
	case PromoteLearner:
		w.promote(m, a, crash)
	case RecordPhase:
		m.phase, m.id = a.Phase, hexID(a.MemberID)
		m.replacing = m.replacing || a.Replacing
	case RemoveMember:
		if m != nil {
			m.phase = stewardv1.MemberRemoving
			m.replacing = m.replacing || a.Replacing
		}
		if !early {
			w.disrupt(f, a)
		}
	case DeletePod, DeletePVC, RestartContainer, Defragment, PrepareEviction:
		w.disrupt(f, a)
	case StartRecovery, RecoveryStep, AbortRecovery, FinishRecovery, DiscardMember, RecordDefragmentation:
		w.applyEvidence(m, a)
	case DetachMember:
		// A member replaced after a node loss: out of etcd first, its PVC kept (its ordinal reserved).
		if w.entry(m) != nil {
			w.violate("detached %s while it is in etcd", m.name)
		}
		w.applyEvidence(m, Action{Kind: DiscardMember, Member: a.Member})
	case Compact:
		w.compacted(a)
		w.events = append(w.events, event{step: w.step, kind: a.Kind, reason: a.Reason})
	case DisarmAlarm:
		if !w.alarm {
			w.staleOr("DisarmAlarm with no alarm raised")
		}
		w.alarm = false
		w.events = append(w.events, event{step: w.step, kind: a.Kind, reason: a.Reason})
	case ResetMember, DeleteMember, FinalizeMember, MoveLeader, PatchPodMetadata, ResizePod, RecordTemplate, ExpandPVC:
		w.applyObject(m, a)
	case ScaleSource:
		w.scaleSource(a)
	case StartHandOver:
		// Its effect is status.adoption, which the world records from every decision.
	case Downgrade:
		// The simulated etcd has no downgrade protocol; downgrade_test.go walks its stages.
		w.violate("a downgrade in a world that never lowers its version: %s", a)
	case Authenticate:
		// The simulated clusters declare no auth; internal/authplan simulates its own world.
		w.violate("an auth step in a world without spec.auth: %s", a)
	}
}

// applyObject: actions on the member object and its Pod/PVC that disrupt nothing.
func (w *world) applyObject(m *wMember, a Action) {
	switch a.Kind {
	case ResetMember:
		if m.pod != nil || m.pvc != nil || w.entry(m) != nil {
			w.violate("ResetMember %s while its Pod, PVC or etcd entry remains", m.name)
		}
		m.phase, m.id, m.template = stewardv1.MemberPending, "", w.observed()
	case DeleteMember:
		if m.deleting {
			w.staleOr("DeleteMember %s: it is being deleted", m.name) // a second delete changes nothing
			return
		}
		w.events = append(w.events, event{step: w.step, kind: DeleteMember, member: m.name, ordinal: m.ordinal, reason: a.Reason})
		m.deleting = true
	case FinalizeMember:
		if w.entry(m) != nil || m.pod != nil || m.pvc != nil {
			w.violate("FinalizeMember %s before it left etcd and its Pod and PVC went", m.name)
		}
		for i, x := range w.members {
			if x == m {
				w.members = append(w.members[:i], w.members[i+1:]...)
				break
			}
		}
	case MoveLeader:
		t := w.entryByID(a.TargetID)
		switch {
		case a.MemberID != w.leader:
			w.staleOr("MoveLeader from %x, but %x leads", a.MemberID, w.leader) // etcd: not leader
		case t == nil || !w.available(t):
			w.staleOr("MoveLeader to %s, which is not an available voter", a.Target) // etcd: timeout
		case w.kubeletUnready(t):
			w.violate("MoveLeader to %s, whose Pod is not Ready for its container now", a.Target)
		default:
			w.leader = t.id
		}
	case PatchPodMetadata:
		if m.pod == nil {
			w.violate("PatchPodMetadata %s without a Pod", m.name)
			return
		}
		md := w.observed().PodMetadata
		m.pod.template.PodMetadata, m.template.PodMetadata = md, *md.DeepCopy()
	case ResizePod:
		if m.pod == nil || m.pod.deleting > 0 {
			w.violate("ResizePod %s without a running Pod", m.name)
			return
		}
		o := w.observed()
		r := o.Resources.DeepCopy()
		m.pod.resources, m.pod.resizing = r, true
		w.resizes++
	case RecordTemplate:
		if m.pod == nil || m.pod.resizing {
			w.violate("RecordTemplate %s before its Pod runs the target", m.name)
			return
		}
		t := w.observed()
		if m.pod.resources != nil && !equality.Semantic.DeepEqual(*m.pod.resources, t.Resources) {
			w.violate("RecordTemplate %s: its Pod was not resized to the target", m.name)
		}
		if m.pod.resources == nil && Compare(m.pod.template, t, w.cluster.Spec.Storage.Medium)&^ChangeMetadata != 0 {
			w.violate("RecordTemplate %s: its Pod runs %s, not the target", m.name, m.pod.template.Image)
		}
		t.PodMetadata = m.template.PodMetadata
		m.template = *t.DeepCopy()
		m.pod.template.Resources = *t.Resources.DeepCopy()
	case ExpandPVC:
		size := *w.observed().Storage.Size
		m.pvc.requested = size.DeepCopy()
		m.template.Storage.Size = &size
	default:
		w.violate("the simulator does not know action %s", a.Kind)
	}
}

func (w *world) newUID() int { w.nextUID++; return w.nextUID }

// staleOr: an action that only stale facts explain is what the controller meets too (the API server
// or etcd refuses it, nothing changes); without lag it is a planner bug.
func (w *world) staleOr(format string, args ...any) {
	if w.lag == 0 && w.etcdLag == 0 {
		w.violate(format, args...)
	}
}

func (w *world) addLearner(m *wMember, crash, early bool) {
	m.phase = stewardv1.MemberJoining
	if early {
		return
	}
	for _, e := range w.etcd {
		if e.learner {
			w.staleOr("MemberAddAsLearner %s while learner %x exists", m.name, e.id) // etcd: too many learners
			return
		}
	}
	if w.entry(m) != nil {
		w.staleOr("MemberAddAsLearner %s: already a member", m.name) // etcd: peer URL exists
		return
	}
	w.nextID++
	w.etcd = append(w.etcd, &wEtcd{id: w.nextID, peerURL: peerURL(m.name), learner: true})
	w.events = append(w.events, event{step: w.step, kind: AddLearner, member: m.name, ordinal: m.ordinal})
	if !crash {
		m.phase, m.id = stewardv1.MemberLearner, hexID(w.nextID)
	}
}

func (w *world) promote(m *wMember, a Action, crash bool) {
	e := w.entryByID(a.MemberID)
	switch {
	case e == nil || !e.learner:
		w.staleOr("PromoteLearner %s: %x is not a learner", m.name, a.MemberID) // etcd refuses
		return
	case !w.up(e) || e.lag > 0:
		return // etcd: "learner not ready"; the plan retries
	}
	e.learner = false
	if !crash {
		m.phase = stewardv1.MemberRunning
	}
}

// disrupt goes through the real chokepoint with effects that check the world independently.
func (w *world) disrupt(f Facts, a Action) {
	if a.Disruption == nil {
		w.violate("%s %s carries no disruption request: it would bypass the chokepoint", a.Kind, a.Member)
		return
	}
	view := f.DisruptionView()
	err := disruption.New(effects{w: w, a: a}).Do(context.Background(), view, *a.Disruption)
	switch {
	case err == nil:
	case disruption.Check(view, *a.Disruption) == nil:
		// Allowed on the plan's facts, refused on the Disrupter's fresh read: the second read did
		// its job (the plan's facts were stale).
		w.staleOr("a disruption allowed on the plan's facts was refused on a fresh read: %v", err)
	default:
		w.violate("the plan proposed a disruption the chokepoint refuses: %v", err)
	}
}

// effects are the world's side effects; each asserts the invariants of docs/design.md on the
// world's own state before acting.
type effects struct {
	w *world
	a Action
}

// Refresh is the controller's second live read before an irreversible step: the world as it is now.
func (x effects) Refresh(context.Context) (disruption.Cluster, error) {
	f := x.w.liveFacts()
	return f.DisruptionView(), nil
}

func (x effects) DeletePod(_ context.Context, name string) error {
	w, m := x.w, x.w.member(name)
	if m == nil || m.pod == nil {
		w.staleOr("DeletePod %s: no Pod", name) // NotFound
		return nil
	}
	if m.pod.uid != w.seenUIDs[name] || m.pod.deleting > 0 {
		// Preconditioned on the UID the plan judged: a Pod recreated since is never the one deleted,
		// and deleting a terminating Pod changes nothing.
		w.staleOr("DeletePod %s: the Pod the plan judged is gone or terminating", name)
		return nil
	}
	if x.a.Disruption != nil && x.a.Disruption.Kind == disruption.Fence {
		w.fenced(x.a, m)
	} else if e := w.entry(m); e != nil && !e.learner && !(m.pod.failed && m.pvc != nil) {
		// A Failed Pod on a PVC is exempt: its etcd never runs again in it, so deleting it takes
		// nothing from anyone (invariant 1 counts members that could serve).
		w.checkDisruption(e, "deleted the Pod of")
		if w.memory() && w.cluster.Spec.Replicas != nil && *w.cluster.Spec.Replicas > 0 {
			w.violate("deleted the Pod of memory voter %s: its data is lost", name)
		}
		w.record(x.a, m, e)
	}
	m.pod.deleting, m.pod.running = 2, false
	return nil
}

func (x effects) RemoveMember(_ context.Context, name string, id uint64) error {
	w := x.w
	e := w.entryByID(id)
	if e == nil {
		w.staleOr("MemberRemove %s: %x is not a member", name, id) // etcd: member not found, taken as done
		return nil
	}
	if !e.learner {
		if all, _ := w.voters(); all == 1 {
			w.violate("removed the last voter %s", name)
		}
		w.checkDisruption(e, "removed")
	}
	w.record(x.a, w.memberOf(e), e)
	for i, o := range w.etcd {
		if o == e {
			w.etcd = append(w.etcd[:i], w.etcd[i+1:]...)
			break
		}
	}
	if w.leader == id {
		w.leader = 0
	}
	return nil
}

func (x effects) DeletePVC(_ context.Context, name string) error {
	w, m := x.w, x.w.member(name)
	switch {
	case m == nil || m.pvc == nil:
		w.staleOr("DeletePVC %s: no PVC", name) // NotFound
	case w.entry(m) != nil:
		w.violate("deleted the data of %s while it is in etcd", name)
	default:
		m.pvc.deleting = true
	}
	return nil
}

// checkDisruption: invariants 1 and 2, on the world's state.
func (w *world) checkDisruption(victim *wEtcd, what string) {
	if *w.cluster.Spec.Replicas == 0 {
		if victim.id == w.leader {
			for _, m := range w.members {
				if m.pod != nil && m.pod.deleting == 0 && peerURL(m.name) != victim.peerURL {
					w.violate("dormant: %s the leader before follower %s", what, m.name)
				}
			}
		}
		return
	}
	if all, _ := w.voters(); all == 1 {
		if w.memory() || !w.cluster.Spec.UpdateStrategy.AllowDowntime {
			w.violate("%s the only member without allowDowntime", what)
		}
		return
	}
	if victim.id == w.leader {
		w.violate("%s leader %s while it leads", what, victim.name)
	}
	for _, o := range w.etcd {
		switch {
		case o == victim:
		case o.learner:
			w.violate("%s %s while learner %x exists", what, victim.name, o.id)
		case !w.available(o):
			w.violate("%s %s while %s is unavailable", what, victim.name, o.name)
		case w.kubeletUnready(o):
			w.violate("%s %s while %s's Pod is not Ready for its container now", what, victim.name, o.name)
		case w.prepared(o):
			w.violate("%s %s while %s is prepared for its eviction", what, victim.name, o.name)
		}
	}
}

func (w *world) record(a Action, m *wMember, e *wEtcd) {
	ev := event{step: w.step, kind: a.Kind, member: a.Member, reason: a.Reason, leader: e != nil && e.id == w.leader}
	if m != nil {
		ev.ordinal = m.ordinal
	}
	w.events = append(w.events, ev)
}

// checkInvariants runs after every step.
func (w *world) checkInvariants() {
	learners := 0
	for _, e := range w.etcd {
		if e.learner {
			learners++
		}
	}
	if learners > 1 {
		w.violate("%d learners", learners)
	}
	if all, _ := w.voters(); *w.cluster.Spec.Replicas <= 1 || all == 0 {
		return // not formed, dormant, or a single member: a full outage is the user's choice
	}
	if down := w.disrupted(); len(down) > 1 {
		w.violate("%d members disrupted at once (beyond the test's own faults): %v", len(down), down)
	}
	if len(w.faults) == 0 && !w.quorum() {
		w.violate("quorum lost without any fault")
	}
	w.checkStatusHonest()
}

// disrupted counts, from the world's own state and not from the plan's, the members that are not
// serving as voters and were not broken by the test: a listed voter that is down or behind, and a
// member that was a voter once and is not one now (removed to be replaced, or a learner again) while
// it is still meant to exist.
func (w *world) disrupted() []string {
	var out []string
	for _, m := range w.members {
		e := w.entry(m)
		if e != nil && !e.learner {
			m.everVoter = true
		}
		switch {
		case w.faults[m.name]:
		case e != nil && !e.learner && m.pod != nil && m.pod.prepared && m.pod.deleting == 0:
			out = append(out, m.name) // out of the client Service, about to be evicted
		case e != nil && !e.learner && !w.available(e):
			out = append(out, m.name)
		case (e == nil || e.learner) && m.everVoter && !m.deleting:
			out = append(out, m.name)
		}
	}
	for _, e := range w.etcd {
		if w.source(e) != nil && !e.learner && !w.available(e) && !w.faults[e.name] {
			out = append(out, "source "+e.name)
		}
	}
	return out
}

// checkStatusHonest: a member status calls updated runs the target in its Pod, on a volume that
// has the target size (issue 10, defect 7).
func (w *world) checkStatusHonest() {
	if w.cluster.Status.Observed == nil {
		return
	}
	target := w.observed()
	for _, ms := range w.last.Members {
		m := w.member(ms.Name)
		if !ms.Updated || m == nil {
			continue
		}
		switch {
		case (m.pod == nil || m.pod.deleting > 0) && !w.deletedNow(m.name):
			w.violate("status calls %s updated without a running Pod", m.name)
		case Compare(m.pod.template, target, w.cluster.Spec.Storage.Medium).Has(ChangeRoll):
			w.violate("status calls %s updated while its Pod runs an outdated template", m.name)
		case m.pvc != nil && target.Storage.Size != nil && m.pvc.capacity.Cmp(*target.Storage.Size) < 0:
			w.violate("status calls %s updated while its volume is %s of %s", m.name, m.pvc.capacity.String(),
				target.Storage.Size.String())
		}
	}
}

func quantity(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

// RestartContainer restarts a voter's container on the target's image in its Pod: judged like any
// disruption; the Pod, its volumes (memory data too) and its identity stay.
func (x effects) RestartContainer(_ context.Context, name string) error {
	w, m := x.w, x.w.member(name)
	if m == nil || m.pod == nil || m.pod.deleting > 0 {
		w.staleOr("RestartContainer %s: no running Pod", name)
		return nil
	}
	if e := w.entry(m); e != nil && !e.learner {
		w.checkDisruption(e, "restarted in place")
		w.record(x.a, m, e)
	}
	w.restartedInPlace(m)
	m.pod.template.Image = w.observed().Image
	m.pod.running, m.pod.age, m.pod.lastTerminated = false, 0, w.now
	m.pod.restarts++
	return nil
}

// Defragment blocks a voter while it runs: judged like any disruption of it.
func (x effects) Defragment(_ context.Context, name string) error {
	w, m := x.w, x.w.member(name)
	if m == nil {
		w.violate("Defragment %s: no such member", name)
		return nil
	}
	if e := w.entry(m); e != nil && !e.learner {
		w.checkDisruption(e, "defragmented")
		w.record(x.a, m, e)
	}
	if e := w.entry(m); e != nil {
		w.defragmented(m, e)
	}
	return nil
}
