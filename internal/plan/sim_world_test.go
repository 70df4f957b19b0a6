package plan

// An in-memory cluster for sequence tests: EtcdMembers, Pods, PVCs and an etcd model (member list
// with learners and voters, leader, applied index). The world checks its own invariants as actions
// land on it, independently of the plan and of the disruption package, so a planner bug shows up as
// a violation here even if disruption.Check has the same bug.

import (
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/health"
)

type world struct {
	t testing.TB
	// refuseJoin, when set, is what every peer answers a joining Steward member's etcd (an adopted
	// source's peer rules): its etcd exits before it joins, again at each start, until cleared.
	refuseJoin string
	rng        *rand.Rand
	crashRate  float64 // chance an action stops half-way, as if the operator died mid-step
	resizes    int     // in-place resizes requested
	crashes    int     // how many steps did
	cluster    *stewardv1.EtcdCluster
	members    []*wMember
	etcd       []*wEtcd
	leader     uint64
	nextID     uint64
	index      uint64
	now        time.Time
	step       int
	faults     map[string]bool // members the test itself broke
	faultStep  int             // when the test last broke one
	resizable  bool            // the StorageClass allows volume expansion
	growPaused bool            // volumes do not grow until the test says so
	// unschedulable names members whose new Pods cannot be scheduled.
	unschedulable map[string]bool
	// planner is Plan unless a test swaps in a broken one to prove the checks can fail.
	planner func(Facts) Decision
	last    Decision
	// check runs after every step: a scenario's own invariant.
	check func(*world)
	// podRevision is the Steward version's Pod revision (Facts.PodRevision): new Pods get it.
	podRevision int
	// crl: members are to check the revocation list (Facts.CRL): new Pods run with it.
	crl bool
	// alarm: NOSPACE is raised (the quota is full) until disarmed.
	alarm bool
	// spaceQuota > 0 models the members' backend sizes against this quota (sim_space_test.go).
	spaceQuota int64
	// lag is the chance a step plans on the previous step's Kubernetes facts (a stale cache);
	// staleMembers are those facts, staleServed counts how often they were used.
	lag          float64
	staleMembers []Member
	staleUIDs    map[string]int
	staleServed  int
	// etcdLag is the chance a step plans on the previous step's etcd facts (read before the
	// Kubernetes facts changed); staleEtcd are those facts.
	etcdLag   float64
	staleEtcd *health.Facts
	// seenUIDs are the Pod UIDs the facts of this step showed: a deletion is preconditioned on
	// them, as the controller's is; nextUID numbers new Pods.
	seenUIDs map[string]int
	nextUID  int
	// liveness: after every step, a fork of the world healed of the test's faults must find its
	// way back to healthy (sim_fork_test.go).
	liveness bool
	trace    []string
	// seq is the golden action sequence (sim_golden_test.go); recording is false for forks.
	seq       []string
	recording bool
	events    []event // disruptions and membership changes, in order
	errs      []string
	// ev holds the knobs of the evidence sequences (sim_evidence_world_test.go): the operator
	// process, the kubelet's reports, quorum recovery and data versions.
	ev evidenceWorld
	// stop ends a run early when it says so (after the step's checks).
	stop func(*world) bool
	// adopt models the source of an adoption (sim_adoption_test.go); nil otherwise.
	adopt *adoptWorld
}

type wMember struct {
	name     string
	ordinal  int32
	phase    stewardv1.MemberPhase
	id       string
	deleting bool
	template stewardv1.MemberTemplate
	pod      *wPod
	pvc      *wPVC
	// replacing is status.replacing; phaseSince and seenPhase time the recorded phase.
	replacing  bool
	phaseSince time.Time
	seenPhase  stewardv1.MemberPhase
	everVoter  bool // it has been a voter: absent from etcd later, it is disrupted
	ev         evidenceMember
}

type wPod struct {
	template      stewardv1.MemberTemplate
	bootstrap     bool // started with --initial-cluster-state=new
	age           int
	running       bool
	deleting      int // ticks until a deleting Pod is gone; 0 = not deleting
	crashing      bool
	oom           bool
	restarts      int32
	unschedulable bool
	data          uint64 // memory storage: the member ID whose data the tmpfs holds
	uid           int
	revision      int  // the Pod revision it was built with
	crl           bool // its etcd checks the revocation list
	failed        bool // phase Failed (evicted): its containers never run again
	stalled       int  // ticks its etcd stays unready without crashing (WAL replay, a disk stall)
	unready       bool // etcd serves, but the readiness probe fails (an alarm, a slow probe)
	// resources is the Pod spec's etcd container resources after an in-place resize (nil: the
	// template's); resizing until the kubelet applied them (the next tick).
	resources *corev1.ResourceRequirements
	resizing  bool
	// what the kubelet reports: when the Pod last turned unready, when etcd last exited.
	notReadySince  time.Time
	lastTerminated time.Time
	ev             evidencePod
	// evictAt is when an eviction of the Pod was first asked for (a node drain; zero: none);
	// prepared: Steward prepared the member for it.
	evictAt  time.Time
	prepared bool
	// joinRefused is the data check's verdict of its etcd's last exit (world.refuseJoin).
	joinRefused string
}

type wPVC struct {
	requested, capacity resource.Quantity
	data                uint64 // the member ID whose data the volume holds; 0 = empty
	deleting            bool
	// writtenBy and storage: the etcd version that last wrote the data, and its storage version.
	writtenBy, storage string
}

type wEtcd struct {
	id      uint64
	peerURL string
	name    string
	learner bool
	applied uint64
	lag     int  // ticks until a freshly started member caught up
	started bool // its process ran at least once
	// db, inUse and live are its backend's sizes (sim_space_test.go), when the world models them.
	db, inUse, live int64
}

type event struct {
	step    int
	kind    Kind
	member  string
	ordinal int32
	reason  Reason
	leader  bool // the member led when it was disrupted
}

func template(version string) stewardv1.MemberTemplate {
	return stewardv1.MemberTemplate{
		Version: version,
		Storage: stewardv1.StorageSpec{Size: ptrTo(resource.MustParse("4Gi"))},
	}
}

func newWorld(t testing.TB, replicas int32, medium stewardv1.StorageMedium) *world {
	c := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "uid-1"}}
	c.Spec.Replicas = ptrTo(replicas)
	c.Spec.MemberTemplate = template("3.5.32")
	c.Spec.Storage.Medium = medium
	w := &world{
		t: t, rng: rand.New(rand.NewSource(1)), cluster: c, faults: map[string]bool{}, unschedulable: map[string]bool{},
		now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), nextID: 0x10, index: 1000, resizable: true, liveness: true,
	}
	w.recordSequence()
	return w
}

func peerURL(name string) string { return fmt.Sprintf("http://%s.c.ns.svc:2380", name) }

func (w *world) memory() bool { return w.cluster.Spec.Storage.Medium == stewardv1.StorageMediumMemory }

func (w *world) violate(format string, args ...any) {
	w.errs = append(w.errs, fmt.Sprintf("step %d: ", w.step)+fmt.Sprintf(format, args...))
}

func (w *world) member(name string) *wMember {
	for _, m := range w.members {
		if m.name == name {
			return m
		}
	}
	return nil
}

func (w *world) entryByURL(url string) *wEtcd {
	for _, e := range w.etcd {
		if e.peerURL == url {
			return e
		}
	}
	return nil
}

func (w *world) entryByID(id uint64) *wEtcd {
	for _, e := range w.etcd {
		if e.id == id {
			return e
		}
	}
	return nil
}

func (w *world) entry(m *wMember) *wEtcd { return w.entryByURL(peerURL(m.name)) }

func (w *world) memberOf(e *wEtcd) *wMember {
	for _, m := range w.members {
		if peerURL(m.name) == e.peerURL {
			return m
		}
	}
	return nil
}

// up says whether a member's etcd process serves: Pod running, not terminating.
func (w *world) up(e *wEtcd) bool {
	if s := w.source(e); s != nil {
		return s.running && s.deleting == 0
	}
	m := w.memberOf(e)
	return m != nil && m.pod != nil && m.pod.running && m.pod.deleting == 0
}

// available says whether a voter serves and has caught up with the leader (recovered).
func (w *world) available(e *wEtcd) bool {
	return !e.learner && w.up(e) && e.lag == 0 && e.applied == w.index
}

func (w *world) voters() (all, up int) {
	for _, e := range w.etcd {
		if !e.learner {
			all++
			if w.up(e) {
				up++
			}
		}
	}
	return all, up
}

func (w *world) quorum() bool {
	all, up := w.voters()
	return all > 0 && up >= all/2+1
}

func (w *world) sortMembers() {
	sort.Slice(w.members, func(i, j int) bool { return w.members[i].ordinal < w.members[j].ordinal })
}

func (w *world) logf(format string, args ...any) {
	w.trace = append(w.trace, fmt.Sprintf("%3d ", w.step)+fmt.Sprintf(format, args...))
}

func hexID(id uint64) string {
	if id == 0 {
		return ""
	}
	return strconv.FormatUint(id, 16)
}

func ptrTo[T any](v T) *T { return &v }
