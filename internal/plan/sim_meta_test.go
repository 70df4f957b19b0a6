package plan

import (
	"context"
	"strings"
	"testing"

	"github.com/etcd-steward/steward/internal/disruption"
)

// A test that cannot fail is a defect: these feed the simulator broken planners and bad effects and
// require the world's own checks to object.

func expectViolation(t *testing.T, w *world, substr string) {
	t.Helper()
	for _, e := range w.errs {
		if strings.Contains(e, substr) {
			return
		}
	}
	t.Errorf("no violation mentioning %q; got %q\n%s", substr, w.errs, w.tail(15))
}

func TestSimulatorCatchesBrokenPlanners(t *testing.T) {
	tests := []struct {
		name    string
		broken  func(f Facts) Decision
		violate string
	}{
		{
			name: "skips the leader hand-off",
			broken: func(f Facts) Decision {
				d := Plan(f)
				if d.Action.Kind == MoveLeader {
					d.Action = act(DeletePod, d.Action.Member, ReasonRollingMember, "x").disrupting(disruption.Restart)
				}
				return d
			},
			violate: "chokepoint refuses",
		},
		{
			name: "bypasses the chokepoint",
			broken: func(f Facts) Decision {
				d := Plan(f)
				d.Action.Disruption = nil
				return d
			},
			violate: "bypass the chokepoint",
		},
		{
			name: "ignores the recovery gate",
			broken: func(f Facts) Decision {
				d := Plan(f)
				if d.Action.Reason != ReasonWaitingForHealth {
					return d
				}
				for _, m := range newView(&f).rollOrder() {
					if m.readyVoter() && !m.leader {
						return Decision{Action: act(DeletePod, m.Name, ReasonRollingMember, "x").disrupting(disruption.Restart)}
					}
				}
				return d
			},
			violate: "chokepoint refuses",
		},
		{
			name: "promotes before catch-up and adds a second learner",
			broken: func(f Facts) Decision {
				d := Plan(f)
				if d.Action.Kind == Wait && d.Action.Reason == ReasonLearnerCatchingUp {
					d.Action = act(AddLearner, "c-4", ReasonJoiningMember, "x")
				}
				return d
			},
			violate: "while learner",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := formedWorld(t, 3, "")
			w.members = append(w.members, &wMember{name: "c-4", ordinal: 4, template: w.observed()})
			w.planner = tt.broken
			w.run(200, map[int]func(*world){1: both(changeResources("1"), scaleTo(5))})
			expectViolation(t, w, tt.violate)
		})
	}
}

// TestWorldChecksItsInvariants calls the world's effects directly, past the chokepoint, and requires
// the world to object: so the sequence tests would catch a chokepoint with the same bug as the plan.
func TestWorldChecksItsInvariants(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		do      func(w *world, x effects)
		violate string
	}{
		{"delete the leader's Pod", func(w *world, x effects) { _ = x.DeletePod(ctx, "c-0") }, "while it leads"},
		{"two disruptions at once", func(w *world, x effects) {
			_ = x.DeletePod(ctx, "c-2")
			_ = x.DeletePod(ctx, "c-1")
		}, "while c-2 is unavailable"},
		{"remove while a learner exists", func(w *world, x effects) {
			w.etcd = append(w.etcd, &wEtcd{id: 0x77, peerURL: "http://x:2380", learner: true})
			_ = x.RemoveMember(ctx, "c-2", w.entry(w.member("c-2")).id)
		}, "while learner"},
		{"delete the data of a member", func(w *world, x effects) { _ = x.DeletePVC(ctx, "c-1") }, "while it is in etcd"},
		{"restart a member that has not caught up", func(w *world, x effects) {
			w.entry(w.member("c-1")).lag = 1
			_ = x.DeletePod(ctx, "c-2")
		}, "while c-1 is unavailable"},
		{"lose quorum", func(w *world, x effects) {
			w.member("c-1").pod.running = false
			w.member("c-2").pod.running = false
			w.checkInvariants()
		}, "members disrupted at once"},
		{"two members out of etcd to be replaced at once", func(w *world, x effects) {
			_ = x.RemoveMember(ctx, "c-2", w.entry(w.member("c-2")).id)
			w.etcd = w.etcd[:1] // c-1 leaves behind the planner's back, not as a test fault
			w.checkInvariants()
		}, "members disrupted at once"},
		{"start on stale data", func(w *world, x effects) {
			m := w.member("c-2")
			w.entry(m).id = 0x999
			m.pod.running = false
			w.start(m)
		}, "stale data"},
		{"finalize a member still in etcd", func(w *world, x effects) {
			w.applyObject(w.member("c-2"), Action{Kind: FinalizeMember, Member: "c-2"})
		}, "before it left etcd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := formedWorld(t, 3, "")
			tt.do(w, effects{w: w})
			expectViolation(t, w, tt.violate)
		})
	}
	t.Run("memory Pod deletion loses data", func(t *testing.T) {
		w := formedWorld(t, 3, memory)
		_ = effects{w: w}.DeletePod(ctx, "c-2")
		expectViolation(t, w, "data is lost")
	})
}
