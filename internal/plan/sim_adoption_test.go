package plan

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/health"
)

// The source of an adoption: etcd members Steward did not create, run by a StatefulSet's Pods.

type adoptWorld struct {
	sources map[string]*wSource // by peer URL
	set     string              // the StatefulSet's name; "" when none is named
	// replicas is the StatefulSet's spec.replicas.
	replicas int32
	checks   []stewardv1.AdoptionCheck
	version  string
	// minVoters is the fewest voters the cluster had at any step after the adoption began.
	minVoters int
}

type wSource struct {
	pod      string
	ordinal  int32
	running  bool
	deleting int // ticks until a stopping Pod is gone
	gone     bool
}

func sourcePeerURL(pod string) string {
	return fmt.Sprintf("http://%s.etcd-headless.ns.svc.cluster.local:2380", pod)
}

// adoptionWorld is a running source of n members (StatefulSet etcd, plaintext), leader etcd-0,
// and an EtcdCluster c joining it with the given replicas.
func adoptionWorld(t *testing.T, n int, replicas int32) *world {
	w := newWorld(t, replicas, stewardv1.StorageMediumDefault)
	w.cluster.Spec.TLS = &stewardv1.TLSSpec{Enabled: ptrTo(false)}
	w.cluster.Spec.Bootstrap = &stewardv1.BootstrapSpec{Join: &stewardv1.JoinSpec{
		Endpoints: []string{"http://etcd.ns.svc:2379"}, StatefulSetName: "etcd"}}
	w.adopt = &adoptWorld{sources: map[string]*wSource{}, set: "etcd", replicas: int32(n), version: "3.5.32",
		checks: []stewardv1.AdoptionCheck{{Name: "Reachable", Passed: true}}, minVoters: n}
	for i := range n {
		pod := fmt.Sprintf("etcd-%d", i)
		w.etcd = append(w.etcd, &wEtcd{id: uint64(i + 1), peerURL: sourcePeerURL(pod), name: pod, started: true, applied: w.index})
		w.adopt.sources[sourcePeerURL(pod)] = &wSource{pod: pod, ordinal: int32(i), running: true}
	}
	w.leader = 1
	w.check = func(w *world) {
		if all, _ := w.voters(); all < w.adopt.minVoters {
			w.adopt.minVoters = all
		}
	}
	return w
}

func (w *world) source(e *wEtcd) *wSource {
	if w.adopt == nil {
		return nil
	}
	return w.adopt.sources[e.peerURL]
}

func (w *world) sourceEndpoints() []health.Endpoint {
	var out []health.Endpoint
	if w.adopt == nil {
		return nil
	}
	for _, e := range w.etcd {
		if w.source(e) == nil || !w.up(e) {
			continue
		}
		ok := w.quorum() && w.leader != 0
		out = append(out, health.Endpoint{Member: SourceName(health.Member{ID: e.id, Name: e.name}), Reachable: true, Healthy: ok,
			MemberID: e.id, LeaderID: w.leader, AppliedIndex: e.applied, Version: w.adopt.version, ReadOK: ok && e.lag == 0})
	}
	return out
}

func (w *world) adoptionFacts() *Adoption {
	if w.adopt == nil {
		return nil
	}
	a := &Adoption{Checks: w.adopt.checks}
	if n := w.sourcesInEtcd(); w.adopt.set != "" && int(w.adopt.replicas) != n {
		// The preflight's StatefulSet check, as the controller runs it whenever the hand-over has
		// not started: every member must be one of the StatefulSet's Pods.
		a.Checks = append(slices.Clone(a.Checks), stewardv1.AdoptionCheck{Name: "StatefulSet",
			Message: fmt.Sprintf("StatefulSet etcd has %d replicas and the cluster %d members", w.adopt.replicas, n)})
	}
	if w.adopt.set != "" {
		set := &SourceSet{Name: w.adopt.set, Found: true, Replicas: w.adopt.replicas}
		for _, s := range w.adopt.sources {
			if !s.gone {
				set.Pods = append(set.Pods, SourcePod{Name: s.pod, Deleting: s.deleting > 0})
			}
		}
		slices.SortFunc(set.Pods, func(a, b SourcePod) int { return strings.Compare(a.Name, b.Name) })
		a.StatefulSet = set
	}
	return a
}

// scaleSource is the StatefulSet controller: Pods at or above the new replicas stop, highest first.
func (w *world) scaleSource(a Action) {
	if w.adopt == nil || w.adopt.set == "" {
		w.violate("ScaleSource without a source StatefulSet")
		return
	}
	if a.SourceReplicas >= w.adopt.replicas {
		w.staleOr("ScaleSource to %d, already at %d", a.SourceReplicas, w.adopt.replicas)
		return
	}
	w.adopt.replicas = a.SourceReplicas
	for _, s := range w.adopt.sources {
		if s.ordinal < a.SourceReplicas || s.gone || s.deleting > 0 {
			continue
		}
		if e := w.entryByURL(sourcePeerURL(s.pod)); e != nil {
			w.violate("scaled StatefulSet Pod %s away while its member is in etcd", s.pod)
		}
		s.deleting = 2
	}
}

func (w *world) tickSources() {
	if w.adopt == nil {
		return
	}
	for _, s := range w.adopt.sources {
		if s.deleting > 0 {
			s.running = false
			if s.deleting--; s.deleting == 0 {
				s.gone = true
			}
		}
	}
}

func (w *world) adoptionPhase() stewardv1.AdoptionPhase {
	if a := w.cluster.Status.Adoption; a != nil {
		return a.Phase
	}
	return ""
}

func TestSimAdoption(t *testing.T) {
	cases := []struct {
		sources  int
		replicas int32
	}{{3, 3}, {5, 3}, {1, 3}, {3, 5}, {1, 1}}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d into %d", tc.sources, tc.replicas), func(t *testing.T) {
			w := adoptionWorld(t, tc.sources, tc.replicas)
			w.converge(nil)
			w.assertConverged()
			if got := w.adoptionPhase(); got != stewardv1.AdoptionDone {
				t.Fatalf("phase %s, want Done\n%s", got, w.tail(30))
			}
			if w.adopt.replicas != 0 {
				t.Errorf("StatefulSet left at %d replicas", w.adopt.replicas)
			}
			floor := min(tc.sources, int(tc.replicas))
			if w.adopt.minVoters < floor {
				t.Errorf("voters dropped to %d, below %d", w.adopt.minVoters, floor)
			}
			for _, s := range w.cluster.Status.Adoption.SourceMembers {
				if s.State != stewardv1.SourceStopped || s.Pod == "" {
					t.Errorf("source member %+v: want Stopped with its Pod", s)
				}
			}
			removed := w.disruptions(ReasonHandingOver)
			if len(removed) != tc.sources {
				t.Errorf("%d source removals, want %d: %s", len(removed), tc.sources, names(removed))
			}
			for i, ev := range removed {
				if want := fmt.Sprintf("source-etcd-%d", tc.sources-1-i); ev.member != want {
					t.Errorf("removal %d was %s, want %s (highest ordinal first)", i, ev.member, want)
				}
				if ev.leader {
					t.Errorf("%s was removed while it led", ev.member)
				}
			}
		})
	}
}

// abortAt sets spec.bootstrap.join.abort.
func abortAt(w *world) { w.cluster.Spec.Bootstrap.Join.Abort = true }

func (w *world) sourcesInEtcd() int {
	n := 0
	for _, e := range w.etcd {
		if w.source(e) != nil {
			n++
		}
	}
	return n
}

func (w *world) stewardInEtcd() []string {
	var out []string
	for _, e := range w.etcd {
		if w.source(e) == nil {
			out = append(out, e.name)
		}
	}
	return out
}

// An abort before any source member left gives the source back whole: Steward's members leave one
// at a time (leadership handed back first), the StatefulSet is untouched.
func TestSimAdoptionAbort(t *testing.T) {
	// (step 2 records the hand-over's start)
	for _, at := range []int{4, 6, 8} { // a learner, catching up, a voter (leading) before the first removal
		t.Run(fmt.Sprintf("at step %d", at), func(t *testing.T) {
			w := adoptionWorld(t, 3, 3)
			// The source's leader loses it to the Steward member: the abort must hand it back.
			w.stop = nil
			w.converge(map[int]func(*world){at: abortAt, at - 1: func(w *world) {
				if e := w.entryByURL(peerURL("c-0")); e != nil && !e.learner && w.available(e) {
					w.leader = e.id
				}
			}})
			if got := w.adoptionPhase(); got != stewardv1.AdoptionAborted {
				t.Fatalf("phase %s, want Aborted\n%s", got, w.tail(30))
			}
			if ours := w.stewardInEtcd(); len(ours) > 0 || len(w.members) > 0 {
				t.Fatalf("Steward members left: in etcd %v, objects %d", ours, len(w.members))
			}
			if len(w.etcd) != 3 || w.adopt.replicas != 3 {
				t.Fatalf("source not whole: %d in etcd, StatefulSet at %d", len(w.etcd), w.adopt.replicas)
			}
			if w.adopt.minVoters < 3 {
				t.Errorf("voters dropped to %d", w.adopt.minVoters)
			}
		})
	}
}

// Once a source member left etcd, abort cannot give the source back: the hand-over holds, with
// the reason, until abort is unset; then it finishes.
func TestSimAdoptionAbortTooLate(t *testing.T) {
	w := adoptionWorld(t, 3, 3)
	w.stop = func(w *world) bool { return len(w.etcd) == 3 && len(w.stewardInEtcd()) == 1 && w.adopt.replicas == 2 }
	w.run(100, nil)
	w.stop = nil

	abortAt(w)
	w.liveness = false // held until the user acts, by design
	d := w.run(10, nil)
	if d.Action.Kind != Wait || d.Action.Reason != ReasonBlocked || !strings.Contains(d.Action.Message, "abort cannot give the source back") {
		t.Fatalf("got %s %s", d.Action, d.Action.Message)
	}
	if len(w.stewardInEtcd()) != 1 || w.adoptionPhase() != stewardv1.AdoptionHandingOver {
		t.Fatalf("the hold changed something: ours %v, phase %s", w.stewardInEtcd(), w.adoptionPhase())
	}
	w.cluster.Spec.Bootstrap.Join.Abort = false
	w.liveness = true
	w.converge(nil)
	w.assertConverged()
	if w.adoptionPhase() != stewardv1.AdoptionDone {
		t.Fatalf("phase %s", w.adoptionPhase())
	}
}

// Deleting the EtcdCluster mid-adoption takes Steward's members out of etcd one at a time before
// the teardown; the source keeps what it has.
func TestSimAdoptionDeleted(t *testing.T) {
	for _, at := range []int{8, 13} {
		t.Run(fmt.Sprintf("at step %d", at), func(t *testing.T) {
			w := adoptionWorld(t, 3, 3)
			w.liveness = false // a deleted cluster ends in teardown, not healthy
			w.converge(map[int]func(*world){at: func(w *world) {
				now := metav1.NewTime(w.now)
				w.cluster.DeletionTimestamp = &now
			}})
			if ours := w.stewardInEtcd(); len(ours) > 0 {
				t.Fatalf("Steward members still in etcd: %v\n%s", ours, w.tail(30))
			}
			if len(w.etcd) == 0 || !w.quorum() {
				t.Fatalf("the source was left without quorum: %d members", len(w.etcd))
			}
		})
	}
}

// The hand-over is crash-safe and idempotent: the operator dying mid-step and stale caches change
// nothing about where it ends.
func TestSimAdoptionCrashesAndStaleReads(t *testing.T) {
	for seed := range int64(12) {
		sources := []int{3, 5}[seed%2] // 5 into 3 starts by removing a source member: no Steward member tells it began
		t.Run(fmt.Sprintf("%d into 3, seed %d", sources, seed), func(t *testing.T) {
			w := adoptionWorld(t, sources, 3)
			w.rng.Seed(seed)
			w.crashRate, w.lag, w.etcdLag = 0.3, 0.3, 0.2
			w.converge(nil)
			w.assertConverged()
			if w.adoptionPhase() != stewardv1.AdoptionDone || w.adopt.replicas != 0 {
				t.Fatalf("phase %s, StatefulSet at %d", w.adoptionPhase(), w.adopt.replicas)
			}
			if w.adopt.minVoters < 3 {
				t.Errorf("voters dropped to %d", w.adopt.minVoters)
			}
		})
	}
}

// A refused preflight changes nothing, however long it runs; the source's members are never taken
// for orphans (today's orphan removal would remove all three).
func TestSimAdoptionRefused(t *testing.T) {
	w := adoptionWorld(t, 3, 3)
	w.adopt.checks = []stewardv1.AdoptionCheck{{Name: "Auth", Message: "etcd authentication is enabled"}}
	w.liveness = false // refused until the user acts, by design
	d := w.run(20, nil)
	if d.Action.Reason != ReasonAdoptionRefused || !strings.Contains(d.Action.Message, "Auth: etcd authentication is enabled") {
		t.Fatalf("got %s %s", d.Action, d.Action.Message)
	}
	if len(w.etcd) != 3 || len(w.members) != 0 || w.adopt.replicas != 3 || w.adoptionPhase() != stewardv1.AdoptionRefused {
		t.Fatalf("something changed: %d in etcd, %d members, StatefulSet %d, phase %s", len(w.etcd), len(w.members),
			w.adopt.replicas, w.adoptionPhase())
	}
	// Fixed by the user: the next preflight passes and the hand-over runs.
	w.adopt.checks = []stewardv1.AdoptionCheck{{Name: "Auth", Passed: true}}
	w.liveness = true
	w.converge(nil)
	w.assertConverged()
}

// A source whose peers refuse Steward's peer certificate (--peer-cert-allowed-cn): the first
// learner's etcd exits before it joins, at every start. Nothing is retried blindly (no learner
// removed and re-added, however long past the learner timeout), no source member is removed, and
// the wait says what the peers answered and the two ways out. Once the source admits Steward's
// members, the learner joins by itself and the hand-over runs; an abort instead leaves the source
// whole.
func TestSimAdoptionPeerRefused(t *testing.T) {
	const answer = `the last, https://etcd-0.etcd-headless.ns.svc:2380, failed with: remote error: tls: bad certificate`
	for _, way := range []string{"admitted", "aborted"} {
		t.Run(way, func(t *testing.T) {
			for _, n := range []int{3, 5} {
				w := adoptionWorld(t, n, 3)
				w.refuseJoin = answer
				w.liveness = false // held until the source admits Steward's members, by design
				d := w.run(int(2*DefaultLearnerTimeout/(10*time.Second)), nil)
				if d.Action.Reason != ReasonLearnerRefused || !strings.Contains(d.Action.Message, "tls: bad certificate") ||
					!strings.Contains(d.Action.Message, "--peer-cert-allowed-cn") || !strings.Contains(d.Action.Message, "abort") {
					t.Fatalf("%d into 3: got %s %s\n%s", n, d.Action, d.Action.Message, w.tail(20))
				}
				if stuck := w.disruptions(ReasonLearnerStuck); len(stuck) > 0 {
					t.Fatalf("%d into 3: the refused learner was removed to retry: %s", n, names(stuck))
				}
				// The spare source members of a larger source go first (5 into 3: two), no more.
				if removed := w.disruptions(ReasonHandingOver); len(removed) != max(n-3, 0) {
					t.Fatalf("%d into 3: %d source members removed while the source refused Steward: %s", n, len(removed), names(removed))
				}
				if a := w.cluster.Status.Adoption; a == nil || a.Phase != stewardv1.AdoptionHandingOver ||
					!strings.Contains(a.Message, "refuse its peer certificate") {
					t.Fatalf("%d into 3: adoption status %+v", n, a)
				}
				w.liveness = true
				if way == "aborted" {
					if n > 3 {
						continue // source members left already: an abort is refused (TestSimAdoptionAbortTooLate)
					}
					abortAt(w) // the source still refusing
					w.converge(nil)
					if p := w.abortedProblem(); p != "" {
						t.Fatal(p)
					}
					continue
				}
				w.refuseJoin = ""
				w.converge(nil)
				w.assertConverged()
				if got := w.adoptionPhase(); got != stewardv1.AdoptionDone {
					t.Fatalf("%d into 3, admitted: phase %s, want Done\n%s", n, got, w.tail(30))
				}
			}
		})
	}
}

// Without a StatefulSet named, removed source members are left for their owner to stop.
func TestSimAdoptionWithoutStatefulSet(t *testing.T) {
	w := adoptionWorld(t, 3, 3)
	w.adopt.set = ""
	w.cluster.Spec.Bootstrap.Join.StatefulSetName = ""
	// The owner stops a source member's process once it left etcd (etcd itself exits when removed).
	w.check = func(w *world) {
		for _, s := range w.adopt.sources {
			if w.entryByURL(sourcePeerURL(s.pod)) == nil {
				s.running = false
			}
		}
	}
	w.converge(nil)
	w.assertConverged()
	for _, s := range w.cluster.Status.Adoption.SourceMembers {
		if s.State != stewardv1.SourceRemoved {
			t.Errorf("%s: %s, want Removed", s.Name, s.State)
		}
	}
}

// abortedProblem: an aborted adoption ends with the source whole and no Steward member anywhere.
func (w *world) abortedProblem() string {
	if ours := w.stewardInEtcd(); len(ours) > 0 || len(w.members) > 0 {
		return fmt.Sprintf("aborted, but Steward members are left: in etcd %v, %d objects", ours, len(w.members))
	}
	for _, e := range w.etcd {
		if !w.available(e) {
			return "aborted, but source member " + e.name + " is not an available voter"
		}
	}
	return ""
}

// spec.paused holds the adoption before its first step: the preflight's verdict and the next step
// are in status, nothing of the source changes; resuming runs it.
func TestSimAdoptionPaused(t *testing.T) {
	w := adoptionWorld(t, 3, 3)
	w.cluster.Spec.Paused = true
	w.liveness = false // held until the user resumes, by design
	w.run(8, nil)
	a := w.cluster.Status.Adoption
	if len(w.members) != 0 || len(w.etcd) != 3 || a == nil || a.Phase != stewardv1.AdoptionPreflight ||
		!strings.HasPrefix(a.Message, "paused; next: ") {
		t.Fatalf("paused: %d members, %d in etcd, adoption %+v", len(w.members), len(w.etcd), a)
	}
	w.cluster.Spec.Paused = false
	w.liveness = true
	w.converge(nil)
	w.assertConverged()
}

// status.adoption.message carries the refusal from the first reconcile on, whichever step ran.
func TestAdoptionRefusedMessageFromTheStart(t *testing.T) {
	w := adoptionWorld(t, 3, 3)
	w.adopt.checks = []stewardv1.AdoptionCheck{{Name: "Auth", Message: "etcd authentication is enabled"}}
	w.liveness = false
	w.run(1, nil)
	a := w.cluster.Status.Adoption
	if a == nil || a.Phase != stewardv1.AdoptionRefused || !strings.Contains(a.Message, "refused and nothing of the source was changed: Auth:") {
		t.Fatalf("after the first reconcile: %+v", a)
	}
}

// A source Steward cannot read (etcd auth refuses the member list without a user) is refused on
// the preflight, not reported as a quorum loss with a recovery plan for a cluster Steward does
// not own (the e2e saw Progressing=QuorumLost and "restore one into a new cluster").
func TestAdoptionUnreadableSourceIsRefusedNotLost(t *testing.T) {
	f := Facts{Cluster: &stewardv1.EtcdCluster{}, Now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	f.Cluster.Name, f.Cluster.Namespace = "c", "ns"
	f.Cluster.Spec.MemberTemplate = template("3.6.16")
	f.Cluster.Status.Observed = ptrTo(template("3.6.16"))
	f.Cluster.Spec.Bootstrap = &stewardv1.BootstrapSpec{Join: &stewardv1.JoinSpec{Endpoints: []string{"http://etcd:2379"}}}
	f.Etcd.MemberListErr = "etcdserver: user name is empty"
	f.Adoption = &Adoption{Checks: []stewardv1.AdoptionCheck{{Name: "Auth", Message: "etcd authentication is enabled"}}}
	d := Plan(f)
	if d.Action.Reason != ReasonAdoptionRefused || d.RecoveryPlan != nil || d.LostSince != nil {
		t.Fatalf("action %s (%s), recovery plan %+v", d.Action, d.Action.Message, d.RecoveryPlan)
	}
	for _, c := range d.Conditions {
		if c.Reason == string(ReasonQuorumLost) {
			t.Errorf("condition %s says %s: %s", c.Type, c.Reason, c.Message)
		}
	}
	if d.Adoption == nil || d.Adoption.Phase != stewardv1.AdoptionRefused {
		t.Errorf("status.adoption %+v", d.Adoption)
	}
}

// A larger source led by a spare member (the first to leave): no Steward member votes yet, so
// leadership goes to the source member that leaves last (CI saw 5 into 3 wait for good with
// "source-etcd-4 leads and no other healthy voter can take over").
func TestSimAdoptionSpareSourceLeads(t *testing.T) {
	for _, leader := range []uint64{5, 4} { // etcd-4, then etcd-3 after etcd-4 left
		w := adoptionWorld(t, 5, 3)
		w.leader = leader
		w.converge(nil)
		w.assertConverged()
		if got := w.adoptionPhase(); got != stewardv1.AdoptionDone {
			t.Fatalf("led by %x: phase %s, want Done\n%s", leader, got, w.tail(30))
		}
		for _, ev := range w.disruptions(ReasonHandingOver) {
			if ev.leader {
				t.Errorf("led by %x: %s was removed while it led", leader, ev.member)
			}
		}
	}
}
