package plan

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// run reconciles step by step until the plan says Nothing, an invariant breaks, or max steps pass.
// hooks run before the tick of their step (counted from the start of this run): the test's own
// faults and spec edits.
func (w *world) run(max int, hooks map[int]func(*world)) Decision {
	var d Decision
	start := w.step
	for i := 0; i < max; i++ {
		w.step++
		if h := hooks[w.step-start]; h != nil {
			h(w)
		}
		w.tick()
		f := w.facts()
		if w.planner != nil {
			d = w.planner(f)
		} else {
			d = Plan(f)
		}
		w.last = d
		w.logf("%-60s %s", d.Action.String(), d.Action.Message)
		w.noteStep(d.Action)
		w.apply(f, d.Action)
		w.recordStatus(d)
		w.checkInvariants()
		if w.check != nil {
			w.check(w)
		}
		if w.liveness && len(w.errs) == 0 {
			if p := w.pathBackToHealthy(); p != "" {
				w.violate("%s", p)
			}
		}
		if len(w.errs) > 0 || (d.Action.Kind == Nothing && w.step-start >= lastHook(hooks)) || (w.stop != nil && w.stop(w)) {
			return d
		}
	}
	return d
}

func lastHook(hooks map[int]func(*world)) int {
	n := 0
	for k := range hooks {
		if k > n {
			n = k
		}
	}
	return n
}

// converge runs to Nothing and fails the test with the trace if it does not get there cleanly.
func (w *world) converge(hooks map[int]func(*world)) {
	w.t.Helper()
	d := w.run(600, hooks)
	if len(w.errs) > 0 || d.Action.Kind != Nothing {
		w.t.Fatalf("did not converge cleanly; last: %s %s\nviolations:\n  %s\ntrace (tail):\n%s",
			d.Action, d.Action.Message, strings.Join(w.errs, "\n  "), w.tail(40))
	}
}

// tail returns the last n distinct lines of the trace (repeated waits collapsed).
func (w *world) tail(n int) string {
	var t []string
	for _, l := range w.trace {
		if len(t) > 0 && len(l) > 4 && len(t[len(t)-1]) > 4 && t[len(t)-1][4:] == l[4:] {
			continue
		}
		t = append(t, l)
	}
	if len(t) > n {
		t = t[len(t)-n:]
	}
	return strings.Join(t, "\n")
}

// assertConverged checks the end state: the spec reached, every member a healthy voter on the spec's
// template (Pod included), ordinals 0..replicas-1 (memory members replaced add-first move on to
// new ordinals: ascending then), one leader, no learner.
func (w *world) assertConverged() {
	w.t.Helper()
	spec := w.cluster.Spec.MemberTemplate
	if !equality.Semantic.DeepEqual(w.cluster.Status.Observed, &spec) {
		w.t.Errorf("status.observed is not the spec")
	}
	n := int(*w.cluster.Spec.Replicas)
	if w.cluster.Spec.Replicas != nil && n == 0 {
		for _, m := range w.members {
			if m.pod != nil {
				w.t.Errorf("dormant but %s still has a Pod", m.name)
			}
		}
		return
	}
	if len(w.members) != n || len(w.etcd) != n {
		w.t.Fatalf("%d members, %d in etcd; want %d\n%s", len(w.members), len(w.etcd), n, w.tail(30))
	}
	f := w.facts()
	addFirst := f.maxSurge() > 0
	for i, m := range w.members {
		e := w.entry(m)
		switch {
		case addFirst && i > 0 && m.ordinal <= w.members[i-1].ordinal:
			w.t.Errorf("member %d has ordinal %d after %d", i, m.ordinal, w.members[i-1].ordinal)
		case !addFirst && m.ordinal != int32(i):
			w.t.Errorf("member %d has ordinal %d: scale-in must remove the highest", i, m.ordinal)
		case m.phase != stewardv1.MemberRunning || m.deleting:
			w.t.Errorf("%s is %s (deleting=%v)", m.name, m.phase, m.deleting)
		case e == nil || e.learner || !w.available(e):
			w.t.Errorf("%s is not an available voter", m.name)
		case Compare(m.template, spec, w.cluster.Spec.Storage.Medium) != 0:
			w.t.Errorf("%s records an outdated template", m.name)
		case m.pod == nil || Compare(m.pod.template, spec, w.cluster.Spec.Storage.Medium) != 0:
			w.t.Errorf("%s's Pod does not run the spec's template", m.name)
		case m.pvc != nil && m.pvc.capacity.Cmp(*spec.Storage.Size) < 0:
			w.t.Errorf("%s's PVC is %s, want %s", m.name, m.pvc.capacity.String(), spec.Storage.Size.String())
		}
	}
	if w.leader == 0 {
		w.t.Errorf("no leader")
	}
}

// formedWorld bootstraps a cluster of n members and forgets the bootstrap's events.
func formedWorld(t *testing.T, n int32, medium stewardv1.StorageMedium) *world {
	t.Helper()
	w := newWorld(t, n, medium)
	w.converge(nil)
	w.assertConverged()
	w.events = nil
	return w
}

// disruptions returns the disruptive events (Pod deletions, removals) with a reason, in order.
func (w *world) disruptions(reasons ...Reason) []event {
	var out []event
	for _, e := range w.events {
		for _, r := range reasons {
			if e.reason == r {
				out = append(out, e)
			}
		}
	}
	return out
}

func names(evs []event) string {
	var s []string
	for _, e := range evs {
		s = append(s, fmt.Sprintf("%s:%s", e.kind, e.member))
	}
	return strings.Join(s, " ")
}

// changeResources is a spec edit that needs a roll of every member.
func changeResources(cpu string) func(*world) {
	return func(w *world) {
		w.cluster.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: *quantity(cpu)}
	}
}
