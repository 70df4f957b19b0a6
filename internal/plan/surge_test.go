package plan

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
)

// TestPlanAddFirst: one step of an add-first replacement of memory members (issue 30) per state.
func TestPlanAddFirst(t *testing.T) {
	outdated := func(f *Facts) { f.retarget(cpu("100m")) }
	// surged: four memory members for spec.replicas 3, every one outdated but current, which is on
	// the target: the add-first member of a roll, a voter now.
	surged := func(current string) func(f *Facts) {
		return func(f *Facts) {
			f.setReplicas(3)
			outdated(f)
			f.m(current).Template = *f.Cluster.Status.Observed.DeepCopy()
		}
	}
	runPlanCases(t, []planCase{
		{name: "a healthy outdated follower: a member on the target is created beside it, nothing disrupted", medium: memory,
			mutate: outdated, want: want{kind: CreateMember, member: "c-3", reason: ReasonRollingMember, message: "replacing c-2 add-first"}},
		{name: "maxSurge 0: remove-first, as before", medium: memory, mutate: func(f *Facts) {
			outdated(f)
			f.Cluster.Spec.UpdateStrategy.MaxSurge = ptrTo[int32](0)
		}, want: want{kind: RemoveMember, member: "c-2", reason: ReasonRollingMember, disruption: disruption.Replace}},
		{name: "an outdated member that is down: remove-first (etcd refuses an add without a connected quorum of the grown cluster)",
			medium: memory, mutate: func(f *Facts) {
				outdated(f)
				f.ep("c-1").Healthy = false
			}, want: want{kind: RemoveMember, member: "c-1", reason: ReasonRollingMember, disruption: disruption.Replace}},
		{name: "another member unhealthy: the add waits for the whole gate", medium: memory, mutate: func(f *Facts) {
			outdated(f)
			f.m("c-0").Template = *f.Cluster.Status.Observed.DeepCopy()
			f.ep("c-0").Healthy = false
		}, want: want{kind: Wait, reason: ReasonWaitingForHealth, message: "replacing c-2 add-first waits"}},
		{name: "the surge member votes: the highest outdated follower is removed", n: 4, medium: memory, mutate: surged("c-3"),
			want: want{kind: DeleteMember, member: "c-2", reason: ReasonRollingMember, message: "its successor votes"}},
		{name: "the surge member votes, the outdated one leads: leadership moves to a member on the target first", n: 4,
			medium: memory, mutate: func(f *Facts) {
				surged("c-3")(f)
				for _, n := range []string{"c-1", "c-2"} {
					f.m(n).Template = *f.Cluster.Status.Observed.DeepCopy()
				}
			}, want: want{kind: MoveLeader, member: "c-0", target: "c-1", reason: ReasonMovingLeader}},
		{name: "the surge member is a learner catching up: nothing else moves", medium: memory, mutate: func(f *Facts) {
			outdated(f)
			f.newMember(3, stewardv1.MemberLearner).Pod = Pod{Exists: true, Ready: true}
			f.addLearner("c-3", false)
		}, want: want{kind: Wait, reason: ReasonLearnerCatchingUp}},
		{name: "the surge learner cannot be scheduled: the wait says how to go on (room, or maxSurge 0)", medium: memory,
			mutate: func(f *Facts) {
				outdated(f)
				f.newMember(3, stewardv1.MemberLearner).Pod = Pod{Exists: true, Unschedulable: true}
				f.addLearner("c-3", false)
			}, want: want{kind: Wait, reason: ReasonMemberUnschedulable, message: "spec.updateStrategy.maxSurge: 0"}},
		{name: "a learner that is no surge cannot be scheduled: no maxSurge advice", medium: memory,
			mutate: func(f *Facts) {
				f.setReplicas(4)
				f.newMember(3, stewardv1.MemberLearner).Pod = Pod{Exists: true, Unschedulable: true}
				f.addLearner("c-3", false)
			}, want: want{kind: Wait, reason: ReasonMemberUnschedulable, message: "learner c-3 cannot be scheduled"}},
		{name: "the surge member is pending: it joins, no second surge", medium: memory, mutate: func(f *Facts) {
			outdated(f)
			f.newMember(3, stewardv1.MemberPending)
		}, want: want{kind: AddLearner, member: "c-3", reason: ReasonJoiningMember}},
		{name: "a scale-in of outdated members with none on the target is a scale-in", n: 5, medium: memory, mutate: func(f *Facts) {
			f.setReplicas(3)
			outdated(f)
		}, want: want{kind: DeleteMember, member: "c-4", reason: ReasonScalingDown}},
		{name: "memory scale-in mid-roll: outdated members leave before the one on the target", n: 5, medium: memory,
			mutate: func(f *Facts) {
				f.setReplicas(3)
				outdated(f)
				f.m("c-4").Template = *f.Cluster.Status.Observed.DeepCopy()
			}, want: want{kind: DeleteMember, member: "c-3", reason: ReasonScalingDown}},
		{name: "PVC scale-in mid-roll: the kept members roll, the highest ordinals leave after, as ever", n: 5,
			mutate: func(f *Facts) {
				f.setReplicas(3)
				outdated(f)
				f.m("c-4").Template = *f.Cluster.Status.Observed.DeepCopy()
			}, want: want{kind: DeletePod, member: "c-2", reason: ReasonRollingMember, disruption: disruption.Restart}},
	})
}

// surgeWatch follows a sequence step by step: the fewest voters etcd had and the most member
// objects there were.
type surgeWatch struct{ minVoters, maxMembers int }

func watchSurge(w *world) *surgeWatch {
	s := &surgeWatch{minVoters: 1 << 30}
	w.check = func(w *world) {
		voters := 0
		for _, e := range w.etcd {
			if !e.learner {
				voters++
			}
		}
		s.minVoters, s.maxMembers = min(s.minVoters, voters), max(s.maxMembers, len(w.members))
	}
	return s
}

func memberNamesOf(w *world) string {
	var out []string
	for _, m := range w.members {
		out = append(out, m.name)
	}
	return strings.Join(out, ",")
}

// removedInOrder are the members removed from etcd (RemoveMember), in order; a removal retried on
// stale facts counts once.
func removedInOrder(w *world) []string {
	var out []string
	for _, e := range w.events {
		if e.kind == RemoveMember && !slices.Contains(out, e.member) {
			out = append(out, e.member)
		}
	}
	return out
}

// TestSequenceMemoryAddFirst: a memory roll never runs below its voter count, runs at most one
// member beyond spec.replicas, takes the members in the roll order (the leader last), and ends on
// new names; maxSurge 0 is the remove-first roll, which the same watch sees drop a voter.
func TestSequenceMemoryAddFirst(t *testing.T) {
	for _, tc := range []struct {
		n             int32
		surge         *int32
		names         string
		minVoters     int
		removed       []string
		wantMaxMember int
	}{
		{n: 3, names: "c-1,c-2,c-3", minVoters: 3, removed: []string{"c-2", "c-1", "c-0"}, wantMaxMember: 4},
		{n: 5, names: "c-1,c-2,c-3,c-4,c-5", minVoters: 5, removed: []string{"c-4", "c-3", "c-2", "c-1", "c-0"}, wantMaxMember: 6},
		// Two members: remove-first is refused (one voter left); add-first rolls them.
		{n: 2, names: "c-1,c-2", minVoters: 2, removed: []string{"c-1", "c-0"}, wantMaxMember: 3},
		{n: 3, surge: ptrTo[int32](0), names: "c-0,c-1,c-2", minVoters: 2, removed: []string{"c-2", "c-1", "c-0"}, wantMaxMember: 3},
	} {
		surge := "default"
		if tc.surge != nil {
			surge = fmt.Sprint(*tc.surge)
		}
		t.Run(fmt.Sprintf("%d members, maxSurge %s", tc.n, surge), func(t *testing.T) {
			w := formedWorld(t, tc.n, memory)
			w.cluster.Spec.UpdateStrategy.MaxSurge = tc.surge
			w.lag, w.etcdLag = simLag, simLag
			before := ids(w)
			s := watchSurge(w)
			w.converge(map[int]func(*world){1: changeResources("100m")})
			w.assertConverged()
			if got := memberNamesOf(w); got != tc.names {
				t.Errorf("members %s, want %s", got, tc.names)
			}
			if s.minVoters != tc.minVoters || s.maxMembers != tc.wantMaxMember {
				t.Errorf("fewest voters %d, most members %d; want %d and %d\n%s", s.minVoters, s.maxMembers,
					tc.minVoters, tc.wantMaxMember, w.tail(60))
			}
			if got := removedInOrder(w); !slices.Equal(got, tc.removed) {
				t.Errorf("removed %v, want %v", got, tc.removed)
			}
			for name, id := range ids(w) {
				for _, old := range before {
					if id == old {
						t.Errorf("%s kept member ID %x: a memory member's data dies with it, each is a new member", name, id)
					}
				}
			}
		})
	}
}

// TestSequenceAddFirstInterrupted: the roll keeps the voter count through an operator that loses
// its cache every step (all facts stale half the time), a spec edited again mid-surge, and a
// member killed mid-roll (a fault: that one is replaced remove-first, the rest add-first).
func TestSequenceAddFirstInterrupted(t *testing.T) {
	t.Run("stale facts and a spec edited mid-surge", func(t *testing.T) {
		w := formedWorld(t, 3, memory)
		w.lag, w.etcdLag = 0.5, 0.5
		s := watchSurge(w)
		w.converge(map[int]func(*world){1: changeResources("100m"), 4: changeResources("300m")})
		w.assertConverged()
		if s.minVoters != 3 || s.maxMembers != 4 {
			t.Errorf("fewest voters %d, most members %d; want 3 and 4\n%s", s.minVoters, s.maxMembers, w.tail(60))
		}
	})
	t.Run("a member killed mid-roll is repaired first, remove-first", func(t *testing.T) {
		w := formedWorld(t, 3, memory)
		s := watchSurge(w)
		w.converge(map[int]func(*world){1: changeResources("100m"), 12: killPod("c-0")})
		w.assertConverged()
		if s.maxMembers > 4 {
			t.Errorf("%d members at once, want at most 4", s.maxMembers)
		}
		wantRepairedFirst(t, w, "c-0")
	})
}

// TestAddFirstRolloutStatus: while the add-first member is created, status.rollout names no member
// being rolled (the new one is not rolled) and keeps the outdated ones pending, the victim first.
func TestAddFirstRolloutStatus(t *testing.T) {
	d := planFor(t, 3, memory, func(f *Facts) { f.retarget(cpu("100m")) })
	if d.Action.Kind != CreateMember || d.Rollout == nil {
		t.Fatalf("got %s, rollout %+v", d.Action, d.Rollout)
	}
	if d.Rollout.Member != "" || len(d.Rollout.Pending) != 3 || d.Rollout.Pending[0] != "c-2" {
		t.Errorf("rollout %+v, want no member and c-2 first of 3 pending", *d.Rollout)
	}
}
