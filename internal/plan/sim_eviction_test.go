package plan

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/etcd-steward/steward/internal/eviction"
)

// PrepareEviction marks a voter prepared for the eviction asked for: judged like any disruption
// (the Disrupter drained it first; the world has no client Service).
func (x effects) PrepareEviction(_ context.Context, name string) error {
	w, m := x.w, x.w.member(name)
	if m == nil || m.pod == nil || m.pod.deleting > 0 {
		w.staleOr("PrepareEviction %s: no running Pod", name)
		return nil
	}
	if e := w.entry(m); e != nil && !e.learner {
		w.checkDisruption(e, "prepared for eviction")
		w.record(x.a, m, e)
	}
	m.pod.prepared = true
	return nil
}

// prepared: the member is prepared for its eviction and still runs.
func (w *world) prepared(e *wEtcd) bool {
	m := w.memberOf(e)
	return m != nil && m.pod != nil && m.pod.prepared && m.pod.deleting == 0
}

// tickEvictions is kubectl drain retrying every few seconds: the webhook lets a prepared Pod's
// eviction through, and one past the bound to the PodDisruptionBudget, which allows it only while
// every other voter is available (minAvailable replicas-1).
func (w *world) tickEvictions() {
	for _, m := range w.members {
		p := m.pod
		if p == nil || p.evictAt.IsZero() || p.deleting > 0 {
			continue
		}
		e := w.entry(m)
		switch {
		case p.prepared:
			if e != nil && e.id == w.leader {
				w.violate("evicted leader %s: it was prepared, and leads", m.name)
			}
		case w.now.Sub(p.evictAt) < eviction.DefaultBound || !w.budgetAllows(m):
			continue
		}
		w.events = append(w.events, event{step: w.step, kind: "Evicted", member: m.name, ordinal: m.ordinal})
		p.deleting, p.running = 2, false
	}
}

// budgetAllows: the PodDisruptionBudget lets m's Pod go: every other member's Pod is ready.
func (w *world) budgetAllows(m *wMember) bool {
	for _, o := range w.members {
		if o != m && (o.pod == nil || o.pod.deleting > 0 || !o.pod.running) {
			return false
		}
	}
	return true
}

// drain asks to evict the members' Pods, as kubectl drain of their nodes would.
func drain(names ...string) func(*world) {
	return func(w *world) {
		for _, n := range names {
			if m := w.member(n); m != nil && m.pod != nil {
				m.pod.evictAt = w.now
			}
		}
	}
}

func TestSequenceDrain(t *testing.T) {
	t.Run("two nodes drained at once: one member at a time, the leader's leadership moved first", func(t *testing.T) {
		w := formedWorld(t, 3, "")
		w.converge(map[int]func(*world){1: drain("c-0", "c-1", "c-2")})
		w.assertConverged()
		var evicted, prepared []string
		for _, e := range w.events {
			switch e.kind {
			case "Evicted":
				evicted = append(evicted, e.member)
			case PrepareEviction:
				prepared = append(prepared, e.member)
				if e.leader {
					t.Errorf("%s prepared while it led", e.member)
				}
			}
		}
		if len(evicted) != 3 || len(prepared) != 3 {
			t.Errorf("evicted %v, prepared %v; want all three, each prepared", evicted, prepared)
		}
	})
	t.Run("memory members: each drained member is replaced add-first, never below 3 voters, none evicted", func(t *testing.T) {
		w := formedWorld(t, 3, memory)
		s := watchSurge(w)
		// The second node is drained while the first member is replaced. Each step takes 10 s here, a
		// replacement 10 steps: the second's request waits for the first replacement, and two
		// requests at once would outlast the eviction's 2-minute bound (measured replacements take
		// 14-19 s); past the bound the PodDisruptionBudget decides, as for any member.
		w.converge(map[int]func(*world){1: drain("c-1"), 8: drain("c-2")})
		w.assertConverged()
		if s.minVoters != 3 || s.maxMembers != 4 {
			t.Errorf("fewest voters %d, most members %d; want 3 and 4\n%s", s.minVoters, s.maxMembers, w.tail(60))
		}
		if got := removedInOrder(w); !slices.Equal(got, []string{"c-1", "c-2"}) {
			t.Errorf("removed %v, want c-1 then c-2 (the earliest request first)\n%s", got, w.tail(60))
		}
		if got := evictedOf(w); len(got) > 0 {
			t.Errorf("evicted %v: Steward removes a drained memory member once its successor votes, before the bound", got)
		}
	})
	t.Run("memory members, maxSurge 0: each evicted member is replaced before the next is prepared", func(t *testing.T) {
		w := formedWorld(t, 3, memory)
		w.cluster.Spec.UpdateStrategy.MaxSurge = ptrTo[int32](0)
		s := watchSurge(w)
		w.converge(map[int]func(*world){1: drain("c-1", "c-2")})
		w.assertConverged()
		if got := evictedOf(w); !slices.Equal(got, []string{"c-1", "c-2"}) || s.minVoters != 2 {
			t.Errorf("evicted %v, fewest voters %d; want c-1 and c-2 evicted remove-first, 2 voters", got, s.minVoters)
		}
	})
	t.Run("a member down: nobody is prepared until it is back", func(t *testing.T) {
		w := formedWorld(t, 3, "")
		w.converge(map[int]func(*world){1: both(func(w *world) {
			p := w.member("c-2").pod
			p.stalled, p.running = 6, false
		}, drain("c-1"))})
		w.assertConverged() // the world refuses a preparation while another member is unavailable
		var got []string
		for _, e := range w.events {
			if e.kind == PrepareEviction || e.kind == "Evicted" {
				got = append(got, string(e.kind)+" "+e.member)
			}
		}
		if strings.Join(got, ", ") != "PrepareEviction c-1, Evicted c-1" {
			t.Errorf("events %v, want c-1 prepared, then evicted", got)
		}
	})
}

// evictedOf are the members whose Pods Kubernetes evicted, in order.
func evictedOf(w *world) []string {
	var out []string
	for _, e := range w.events {
		if e.kind == "Evicted" {
			out = append(out, e.member)
		}
	}
	return out
}
