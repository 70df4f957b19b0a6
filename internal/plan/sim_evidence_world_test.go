package plan

// The world's knobs for the evidence sequences (issue 23): which operator process plans, what the
// kubelet reports of each Pod (container running, its ID, the generation its Ready condition was
// computed for, and how long it lags behind an in-place restart), the quorum recovery's records,
// and the version each member's data was last written by. Each knob comes with the world's own
// check of what it guards, judged on the world's state and not on the plan's.

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

type evidenceWorld struct {
	// observer is Facts.Observer: a new value is an operator restart.
	observer string
	// kubelet: the kubelet reports container state (Stopped, on a Ready node), container IDs and
	// the generation its Ready condition observed; etcd reports raft indexes. Off, the world
	// reports what it always did.
	kubelet bool
	// kubeletLag is how many ticks after an in-place restart the kubelet still reports the Pod
	// Ready for the container that was restarted (then one tick not Ready while the new
	// container's readiness probe runs).
	kubeletLag int
	cids       int
	// reserved are ordinals of members a quorum recovery discarded (their PVCs kept).
	reserved []int32
	// dropped are the reasons the plan gave for removing the recover-quorum annotation.
	dropped []string
	// versions are, by member, the etcd versions its Pods started, in order.
	versions map[string][]string
}

type evidenceMember struct {
	defrag      *stewardv1.MemberDefragmentation // status.defragmentation
	dataVersion *stewardv1.DataVersion           // status.dataVersion, as the controller records it
}

type evidencePod struct {
	forceNew bool // built with --force-new-cluster
	// generation of the Pod spec; observedGen is what the kubelet's Ready condition last observed.
	generation, observedGen int64
	// containerID is the etcd container now; restartedFrom the one an in-place restart replaced.
	containerID, restartedFrom string
	// stale: ticks the kubelet still reports the old container; probe: ticks the new one is unready.
	stale, probe int
}

func (w *world) newCID() string { w.ev.cids++; return fmt.Sprintf("containerd://%d", w.ev.cids) }

// tickKubelet: the kubelet catches up with an in-place restart, then the new container's probe.
func (w *world) tickKubelet(p *wPod) {
	switch {
	case p == nil:
	case p.ev.stale > 0:
		if p.ev.stale--; p.ev.stale == 0 {
			p.ev.containerID, p.ev.observedGen = w.newCID(), p.ev.generation
		}
	case p.ev.probe > 0 && p.running:
		p.ev.probe--
	}
}

// trueReady: the Pod is in the client Service for its container now (what the kubelet will say
// once it caught up).
func trueReady(p *wPod) bool {
	return p.running && p.deleting == 0 && !p.unready && p.ev.stale == 0 && p.ev.probe == 0
}

// reportedReady is the Pod's Ready condition as the kubelet reports it: still True for the old
// container while it lags behind an in-place restart.
func (w *world) reportedReady(p *wPod) bool {
	if p.ev.stale > 0 {
		return p.deleting == 0
	}
	return trueReady(p)
}

// kubeletUnready: the member's Pod is out of the client Service now, whatever the kubelet says yet.
func (w *world) kubeletUnready(e *wEtcd) bool {
	m := w.memberOf(e)
	return w.ev.kubelet && m != nil && m.pod != nil && !trueReady(m.pod)
}

func (w *world) raftIndex(e *wEtcd) uint64 {
	if w.ev.kubelet {
		return e.applied
	}
	return 0
}

// started: a member's etcd process just started. A survivor started with --force-new-cluster
// rewrites the membership to itself alone; a PVC's data refuses an etcd more than one minor newer
// than the version that last wrote it, or older than its storage version.
func (w *world) started(m *wMember, e *wEtcd) {
	p := m.pod
	if w.ev.versions == nil {
		w.ev.versions = map[string][]string{}
	}
	if l := w.ev.versions[m.name]; len(l) == 0 || l[len(l)-1] != p.template.Version {
		w.ev.versions[m.name] = append(l, p.template.Version)
	}
	if p.ev.forceNew {
		w.etcd, w.leader, e.learner = []*wEtcd{e}, e.id, false
	}
	if v := m.pvc; v != nil && !w.memory() {
		run, okRun := parseVersion(p.template.Version)
		by, okBy := parseVersion(v.writtenBy)
		st, okSt := parseVersion(v.storage + ".0")
		switch {
		case okRun && okBy && run[0] == by[0] && run[1] > by[1]+1:
			w.violate("%s started etcd %s on data last written by %s", m.name, p.template.Version, v.writtenBy)
		case okRun && okSt && (run[0] < st[0] || run[0] == st[0] && run[1] < st[1]):
			w.violate("%s started etcd %s on data of storage version %s", m.name, p.template.Version, v.storage)
		}
	}
	if w.ev.kubelet && p.ev.containerID == "" {
		p.ev.containerID, p.ev.generation, p.ev.observedGen = w.newCID(), 1, 1
	}
}

// restartedInPlace: the Pod spec's image changed (a new generation); the kubelet restarts the
// container and reports it kubeletLag ticks later.
func (w *world) restartedInPlace(m *wMember) {
	p := m.pod
	if !w.ev.kubelet {
		return
	}
	p.ev.restartedFrom, p.ev.generation = p.ev.containerID, p.ev.generation+1
	p.ev.stale, p.ev.probe = w.ev.kubeletLag, 1
	if p.ev.stale == 0 {
		p.ev.containerID, p.ev.observedGen = w.newCID(), p.ev.generation
	}
}

// evidenceFacts adds to a member's facts what the controller reads of its records and its kubelet.
func (w *world) evidenceFacts(m *wMember, fm *Member) {
	fm.Defrag, fm.DataVersion = m.ev.defrag.DeepCopy(), m.ev.dataVersion.DeepCopy()
	p := m.pod
	if p == nil {
		return
	}
	fm.Pod.ForceNewCluster = p.ev.forceNew
	if !w.ev.kubelet {
		return
	}
	fm.Pod.NodeReady = true
	fm.Pod.Stopped = !p.running && p.deleting == 0
	fm.Pod.Generation, fm.Pod.RestartedFrom = p.ev.generation, p.ev.restartedFrom
	if p.ev.stale > 0 {
		fm.Pod.ContainerID, fm.Pod.ContainerReady, fm.Pod.ReadyObservedGeneration = p.ev.restartedFrom, true, p.ev.generation-1
		return
	}
	fm.Pod.ContainerID, fm.Pod.ContainerReady, fm.Pod.ReadyObservedGeneration = p.ev.containerID, trueReady(p), p.ev.observedGen
}

// recordEvidence is what the controller writes from a decision: members' data versions, the
// quorum recovery's lostSince, observer and plan, and the annotation's removal. The data itself
// remembers which etcd last wrote it.
func (w *world) recordEvidence(d Decision) {
	for name, dv := range d.DataVersions {
		if m := w.member(name); m != nil {
			m.ev.dataVersion = dv.DeepCopy()
		}
	}
	storage := w.storageVersion()
	for _, m := range w.members {
		if m.pvc != nil && m.pod != nil && m.pod.running && m.pod.deleting == 0 {
			m.pvc.writtenBy = m.pod.template.Version
			if s := storage; s != "" {
				m.pvc.storage = s[:len(s)-2] // "3.6.0" -> "3.6"
			}
		}
	}
	qr := w.cluster.Status.QuorumRecovery
	if qr == nil {
		qr = &stewardv1.QuorumRecoveryStatus{}
	}
	qr.LostSince, qr.Observer, qr.Plan = d.LostSince, d.LostObserver, d.RecoveryPlan
	if qr.LostSince == nil && qr.Plan == nil && qr.InProgress == nil && qr.Last == nil {
		qr = nil
	}
	w.cluster.Status.QuorumRecovery = qr
	if d.DropRecoverAnnotation != "" {
		w.ev.dropped = append(w.ev.dropped, d.DropRecoverAnnotation)
		w.dropAnnotations()
	}
}

func (w *world) dropAnnotations() {
	delete(w.cluster.Annotations, stewardv1.AnnotationRecoverQuorum)
	delete(w.cluster.Annotations, stewardv1.AnnotationRecoverQuorumConfirm)
}

// applyEvidence carries out the recovery's bookkeeping and the defragmentation record's closing,
// as the controller does.
func (w *world) applyEvidence(m *wMember, a Action) {
	w.events = append(w.events, event{step: w.step, kind: a.Kind, member: a.Member, reason: a.Reason})
	if a.Kind == RecordDefragmentation {
		m.ev.defrag = &stewardv1.MemberDefragmentation{Last: &stewardv1.DefragmentationResult{
			Time: metav1.NewTime(w.now), Outcome: stewardv1.DefragmentationInterrupted}}
		return
	}
	if w.cluster.Status.QuorumRecovery == nil {
		w.cluster.Status.QuorumRecovery = &stewardv1.QuorumRecoveryStatus{}
	}
	qr := w.cluster.Status.QuorumRecovery
	switch a.Kind {
	case StartRecovery:
		if qr.InProgress != nil {
			w.violate("StartRecovery while a recovery is in progress")
		}
		qr.InProgress = a.Recovery.DeepCopy()
	case RecoveryStep:
		if qr.InProgress == nil {
			w.violate("RecoveryStep without a recovery in progress")
			return
		}
		qr.InProgress.Stage, qr.InProgress.Since = a.Stage, metav1.NewTime(w.now)
	case FinishRecovery, AbortRecovery:
		outcome := stewardv1.RecoveryRecovered
		if a.Kind == AbortRecovery {
			outcome = stewardv1.RecoveryAborted
		}
		if p := qr.InProgress; p != nil {
			qr.Last = &stewardv1.QuorumRecoveryRecord{Time: metav1.NewTime(w.now), Survivor: p.Survivor, Trigger: p.Trigger,
				Discarded: p.Discarded, Outcome: outcome, Message: a.Message}
		}
		qr.InProgress = nil
		w.dropAnnotations()
	case DiscardMember:
		if m == nil {
			return
		}
		if w.quorum() && w.entry(m) != nil {
			w.violate("discarded %s while it is a member of a cluster with quorum", m.name)
		}
		w.ev.reserved = append(w.ev.reserved, m.ordinal)
		for i, x := range w.members {
			if x == m {
				w.members = append(w.members[:i], w.members[i+1:]...)
				break
			}
		}
	}
}

// fenced: a quorum recovery deletes a member's Pod. That is only ever right while etcd has no
// quorum (the world's own truth, not the plan's evidence); the survivor's own restarts are not fencing.
func (w *world) fenced(a Action, m *wMember) {
	if a.Reason == ReasonFencingMember && w.quorum() {
		w.violate("fenced %s while etcd had quorum (leader %x)", m.name, w.leader)
	}
	w.events = append(w.events, event{step: w.step, kind: a.Kind, member: a.Member, ordinal: m.ordinal, reason: a.Reason})
}

// deletedNow: this step's action deleted the member's Pod (a fence): the status it wrote was judged
// on the Pod before.
func (w *world) deletedNow(name string) bool {
	for _, e := range w.stepEvents() {
		if e.kind == DeletePod && e.member == name {
			return true
		}
	}
	return false
}
