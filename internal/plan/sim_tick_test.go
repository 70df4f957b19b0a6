package plan

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/health"
)

// tick advances the world by one reconcile interval: Pods terminate and start, etcd elects and
// replicates, volumes grow.
func (w *world) tick() {
	w.now = w.now.Add(10 * 1e9)
	w.tickEvictions()
	for _, m := range w.members {
		w.tickPod(m)
		if p := m.pvc; p != nil {
			if p.deleting && m.pod == nil {
				m.pvc = nil
			} else if !w.growPaused && p.capacity.Cmp(p.requested) < 0 {
				p.capacity = p.requested.DeepCopy()
			}
		}
	}
	w.tickSources()
	w.tickEtcd()
	for name := range w.faults {
		m := w.member(name)
		if m == nil || m.deleting || (w.entry(m) != nil && w.available(w.entry(m))) {
			delete(w.faults, name) // repaired, or replaced and a voter again, or gone
		}
	}
}

func (w *world) tickPod(m *wMember) {
	p := m.pod
	w.tickKubelet(p)
	if p != nil && p.running && p.deleting == 0 {
		p.resizing = false // the kubelet applies a resize to the running container
	}
	switch {
	case p == nil:
		return
	case p.deleting > 0:
		p.running = false
		if p.deleting--; p.deleting == 0 {
			m.pod = nil
		}
		return
	case p.unschedulable:
		return
	case p.failed:
		p.running = false
		return
	case p.stalled > 0:
		p.stalled--
		p.running = false
		return
	case p.crashing:
		p.running = false
		p.restarts++
		p.lastTerminated = w.now
		return
	}
	p.age++
	if !p.running && p.age >= 1 {
		w.start(m)
	}
}

// start runs a member's etcd process and checks it starts the way etcd would let it: as the seed of
// a new cluster, or as a listed member on its own data (or, if it never ran, on empty data).
func (w *world) start(m *wMember) {
	p := m.pod
	if p.bootstrap && len(w.etcd) == 0 {
		w.nextID++
		w.etcd = append(w.etcd, &wEtcd{id: w.nextID, peerURL: peerURL(m.name), name: m.name})
		w.leader = w.nextID
	}
	e := w.entry(m)
	if e == nil && p.joinRefused != "" {
		// Never joined, and removed from etcd since (an abort): etcd finds no member to be.
		p.restarts++
		return
	}
	if e == nil {
		w.violate("%s's Pod started but %s is not in the member list (and is no seed)", m.name, m.name)
		return
	}
	data := &p.data
	if m.pvc != nil {
		data = &m.pvc.data
	} else if !w.memory() {
		w.violate("%s's Pod started without a PVC", m.name)
		return
	}
	if w.refuseJoin != "" && !e.started && w.source(e) == nil {
		// etcd asks the peers for the member list first, and exits when none gives it.
		p.joinRefused, p.lastTerminated = w.refuseJoin, w.now
		p.restarts++
		return
	}
	p.joinRefused = ""
	switch {
	case *data != 0 && *data != e.id:
		w.violate("%s started on stale data of removed member %x (it is %x now)", m.name, *data, e.id)
		return
	case *data == 0 && e.started && !e.learner:
		w.violate("voter %s (%x) restarted without its data", m.name, e.id)
	}
	*data = e.id
	e.name, e.started, e.lag = m.name, true, 1
	p.running = true
	w.started(m, e)
}

func (w *world) tickEtcd() {
	if l := w.entryByID(w.leader); l == nil || l.learner || !w.up(l) || !w.quorum() {
		w.leader = 0
	}
	if w.leader == 0 && w.quorum() {
		for _, e := range w.etcd { // lowest ID wins the election, deterministically
			if !e.learner && w.up(e) && (w.leader == 0 || e.id < w.leader) {
				w.leader = e.id
			}
		}
	}
	if w.leader == 0 {
		return
	}
	w.index += 10
	for _, e := range w.etcd {
		switch {
		case !w.up(e):
		case e.id == w.leader:
			e.lag, e.applied = 0, w.index
		case e.lag > 0:
			e.lag--
			e.applied = w.index / 2 // replaying: far behind
		default:
			e.applied = w.index
		}
	}
}

// facts is what a controller would gather from this world: live etcd facts, and Kubernetes facts
// that, with lag > 0, may come from the previous step (an informer cache that has not caught up).
func (w *world) facts() Facts {
	f := w.liveFacts()
	uids := map[string]int{}
	for _, m := range w.members {
		if m.pod != nil {
			uids[m.name] = m.pod.uid
		}
	}
	if w.lag > 0 && w.staleMembers != nil && w.rng.Float64() < w.lag {
		f.Members, uids = w.staleMembers, w.staleUIDs
		w.staleServed++
	}
	live := f.Etcd
	if w.etcdLag > 0 && w.staleEtcd != nil && w.rng.Float64() < w.etcdLag {
		f.Etcd = *w.staleEtcd // etcd read before the Kubernetes facts changed
		w.staleServed++
	}
	w.staleMembers, w.staleUIDs, w.seenUIDs, w.staleEtcd = f.Members, uids, uids, &live
	return f
}

// liveFacts is what a read past the cache gathers: the world as it is now.
func (w *world) liveFacts() Facts {
	f := Facts{Cluster: w.cluster.DeepCopy(), Now: w.now, PodRevision: w.podRevision, CRL: w.crl, Observer: w.ev.observer,
		ReservedOrdinals: w.ev.reserved}
	for _, m := range w.members {
		w.observeMember(m)
		f.Members = append(f.Members, w.memberFacts(m))
	}
	f.Etcd = w.etcdFacts()
	f.Adoption = w.adoptionFacts()
	if f.Etcd.MemberListKnown() && len(w.etcd) > 0 {
		f.EtcdClusterID = "c1"
	}
	return f
}

// observeMember does what the API server and the kubelet do with times: phaseSince moves when the
// phase is written, status.replacing is cleared once Running, and a Pod's Ready condition keeps
// the moment it turned False.
func (w *world) observeMember(m *wMember) {
	if m.phase != m.seenPhase {
		m.seenPhase, m.phaseSince = m.phase, w.now
	}
	if m.phase == stewardv1.MemberRunning {
		m.replacing = false
	}
	if p := m.pod; p != nil {
		switch ready := w.reportedReady(p); {
		case ready:
			p.notReadySince = time.Time{}
		case p.notReadySince.IsZero():
			p.notReadySince = w.now
		}
	}
}

func (w *world) memberFacts(m *wMember) Member {
	fm := Member{Name: m.name, Ordinal: m.ordinal, PeerURL: peerURL(m.name), Phase: m.phase, ID: m.id,
		Deleting: m.deleting, Template: *m.template.DeepCopy(), Replacing: m.replacing, PhaseSince: m.phaseSince}
	if p := m.pod; p != nil {
		fm.Pod = Pod{Exists: true, Ready: w.reportedReady(p), Deleting: p.deleting > 0,
			RestartCount: p.restarts, Unschedulable: p.unschedulable, Phase: corev1.PodRunning,
			Failed: p.failed, NotReadySince: p.notReadySince, LastTerminatedAt: p.lastTerminated,
			BackOff: p.crashing && !p.running, Template: p.template.DeepCopy(), Revision: p.revision,
			ServesCRL: p.crl, EvictionRequested: p.evictAt, EvictionPrepared: p.prepared}
		fm.Pod.Resize = Resize{Spec: *p.template.Resources.DeepCopy(), Applied: !p.resizing}
		if t := w.cluster.Status.Observed; t != nil {
			a, b := *p.template.DeepCopy(), *t.DeepCopy()
			a.Image, b.Image = "", ""
			fm.Pod.ImageOnly = p.template.Image != t.Image && Compare(a, b, w.cluster.Spec.Storage.Medium)&^ChangeMetadata == 0
		}
		if p.resources != nil {
			fm.Pod.Resize.Spec = *p.resources.DeepCopy()
		}
		if p.failed {
			fm.Pod.Phase = corev1.PodFailed
		}
		if !p.running {
			fm.Pod.JoinRefused = p.joinRefused
		}
		if p.oom {
			fm.Pod.LastTerminationReason = "OOMKilled"
		} else if p.crashing {
			fm.Pod.LastTerminationReason = "Error"
		}
	}
	w.evidenceFacts(m, &fm)
	if v := m.pvc; v != nil {
		fm.PVC = PVC{Exists: true, Deleting: v.deleting, Requested: v.requested.DeepCopy(),
			Capacity: v.capacity.DeepCopy(), Resizable: w.resizable}
	}
	return fm
}

func (w *world) etcdFacts() health.Facts {
	var h health.Facts
	if w.alarm && len(w.etcd) > 0 {
		h.Alarms = []health.Alarm{{MemberID: w.etcd[0].id, Type: "NOSPACE"}}
	}
	if !w.quorum() {
		h.MemberListErr = "etcdserver: request timed out"
	} else {
		for _, e := range w.etcd {
			h.Members = append(h.Members, health.Member{ID: e.id, Name: e.name, PeerURLs: []string{e.peerURL}, IsLearner: e.learner})
		}
	}
	storage := w.storageVersion()
	h.Endpoints = append(h.Endpoints, w.sourceEndpoints()...)
	for _, e := range w.etcd {
		m := w.memberOf(e)
		if m == nil || !w.up(e) {
			continue
		}
		ok := w.quorum() && w.leader != 0
		h.Endpoints = append(h.Endpoints, health.Endpoint{
			Member: m.name, Reachable: true, Healthy: ok, MemberID: e.id, LeaderID: w.leader,
			AppliedIndex: e.applied, Version: m.pod.template.Version, ReadOK: ok && !e.learner && e.lag == 0,
			StorageVersion: storage, RaftIndex: w.raftIndex(e),
		})
		w.spaceFacts(e, &h.Endpoints[len(h.Endpoints)-1])
	}
	return h
}

// storageVersion is what etcd 3.6+ reports of its data: the cluster version (the lowest minor any
// member runs) once that is 3.6 or later, none before.
func (w *world) storageVersion() string {
	low := [3]int{-1}
	for _, e := range w.etcd {
		m := w.memberOf(e)
		if m == nil || m.pod == nil {
			continue
		}
		v, ok := parseVersion(m.pod.template.Version)
		if !ok {
			return ""
		}
		if low[0] < 0 || v[0] < low[0] || v[0] == low[0] && v[1] < low[1] {
			low = v
		}
	}
	if low[0] < 3 || low[0] == 3 && low[1] < 6 {
		return ""
	}
	return strconv.Itoa(low[0]) + "." + strconv.Itoa(low[1]) + ".0"
}

// clusterID is recorded by the controller once it read a member list.
func (w *world) recordStatus(d Decision) {
	if w.cluster.Status.ClusterID == "" && len(w.etcd) > 0 && w.quorum() {
		w.cluster.Status.ClusterID = strconv.FormatUint(0xc1, 16)
	}
	for _, c := range d.Conditions {
		meta.SetStatusCondition(&w.cluster.Status.Conditions, c)
	}
	w.cluster.Status.LastStep = d.Step
	w.cluster.Status.Adoption = d.Adoption
	w.recordEvidence(d)
}
