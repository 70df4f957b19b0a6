package plan

import (
	"strings"
	"testing"
	"time"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/eviction"
)

// evictionAsked records eviction requests of the members, one second apart, the first named earliest.
func evictionAsked(names ...string) func(f *Facts) {
	return func(f *Facts) {
		for i, n := range names {
			f.m(n).Pod.EvictionRequested = f.Now.Add(-time.Duration(len(names)-i) * time.Second)
		}
	}
}

// TestEviction: the planner prepares a member whose eviction was asked for, one at a time, the
// leader's leadership moved first, only on a healthy cluster.
func TestEviction(t *testing.T) {
	prepared := func(name string) func(f *Facts) {
		return func(f *Facts) { f.m(name).Pod.EvictionPrepared = true }
	}
	tests := []struct {
		name   string
		change []func(f *Facts)
		kind   Kind
		member string
		reason Reason
		says   string
	}{
		{name: "no request: nothing", kind: Nothing},
		{name: "a follower is prepared", change: []func(*Facts){evictionAsked("c-2")},
			kind: PrepareEviction, member: "c-2", reason: ReasonPreparingEviction},
		{name: "the leader hands leadership over first", change: []func(*Facts){evictionAsked("c-0")},
			kind: MoveLeader, member: "c-0", reason: ReasonMovingLeader},
		{name: "the earliest request goes first", change: []func(*Facts){evictionAsked("c-2", "c-1")},
			kind: PrepareEviction, member: "c-2"},
		{name: "one prepared: the next waits for its eviction", change: []func(*Facts){evictionAsked("c-1", "c-2"), prepared("c-1")},
			kind: Wait, reason: ReasonWaitingForEviction, says: "c-1 is prepared"},
		{name: "prepared and leading again: leadership moves off", change: []func(*Facts){evictionAsked("c-1"), prepared("c-1"),
			func(f *Facts) { f.lead("c-1") }},
			kind: MoveLeader, member: "c-1"},
		{name: "another member down: repair first, nobody prepared", change: []func(*Facts){evictionAsked("c-1"),
			func(f *Facts) { f.podGone("c-2") }},
			kind: CreatePod, member: "c-2"},
		{name: "another member unhealthy: waits for the gate", change: []func(*Facts){evictionAsked("c-1"),
			func(f *Facts) { f.silence("c-2") }},
			kind: Wait, reason: ReasonWaitingForHealth, says: "preparing c-1 for its eviction waits"},
		{name: "an expired request is over", change: []func(*Facts){func(f *Facts) {
			f.m("c-1").Pod.EvictionRequested = f.Now.Add(-eviction.RequestLifetime)
		}}, kind: Nothing},
		{name: "a terminating Pod is not prepared", change: []func(*Facts){evictionAsked("c-1"),
			func(f *Facts) { f.m("c-1").Pod.Deleting = true }},
			kind: Wait},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := healthyFacts(t, 3, "")
			for _, c := range tt.change {
				c(&f)
			}
			d := Plan(f)
			a := d.Action
			if a.Kind != tt.kind || (tt.member != "" && a.Member != tt.member) || (tt.reason != "" && a.Reason != tt.reason) {
				t.Fatalf("Plan() = %s: %s; want %s %s (%s)", a, a.Message, tt.kind, tt.member, tt.reason)
			}
			if !strings.Contains(a.Message, tt.says) {
				t.Errorf("message %q does not say %q", a.Message, tt.says)
			}
			if a.Kind == PrepareEviction && (a.Disruption == nil || a.Disruption.Kind != disruption.Evict) {
				t.Errorf("PrepareEviction without an Evict disruption: %+v", a.Disruption)
			}
		})
	}
}

// TestPreparedMemberBlocksOtherDisruptions: a prepared member counts as disrupted, so a roll waits.
func TestPreparedMemberBlocksOtherDisruptions(t *testing.T) {
	f := healthyFacts(t, 3, "")
	f.m("c-1").Pod.EvictionRequested = f.Now.Add(-time.Second)
	f.m("c-1").Pod.EvictionPrepared = true
	if err := disruption.Check(f.DisruptionView(), disruption.Request{Kind: disruption.Restart, Victim: "c-2"}); err == nil {
		t.Fatal("a restart of c-2 is allowed while c-1 is prepared for its eviction")
	}
}

// TestEvictionMemoryAddFirst: a drained memory member is a planned move of a healthy member, so it
// is replaced add-first (issue 30): its successor is created and votes before it is removed, and
// the removal (Steward deletes the Pod) is what ends the eviction, not the eviction itself.
func TestEvictionMemoryAddFirst(t *testing.T) {
	// surged: the successor c-3 was created for the drained member and votes.
	surged := func(drained string) func(f *Facts) {
		return func(f *Facts) {
			f.setReplicas(3)
			evictionAsked(drained)(f)
		}
	}
	runPlanCases(t, []planCase{
		{name: "a drained follower: its successor is created first, nothing disrupted", medium: memory, mutate: evictionAsked("c-1"),
			want: want{kind: CreateMember, member: "c-3", reason: ReasonPreparingEviction, message: "replacing c-1 add-first for its eviction"}},
		{name: "the drained member leads: its successor is created first too", medium: memory, mutate: evictionAsked("c-0"),
			want: want{kind: CreateMember, member: "c-3", reason: ReasonPreparingEviction}},
		{name: "the successor votes: the drained member is removed", n: 4, medium: memory, mutate: surged("c-1"),
			want: want{kind: DeleteMember, member: "c-1", reason: ReasonPreparingEviction, message: "its successor votes"}},
		{name: "the successor votes, the drained member leads: leadership moves first", n: 4, medium: memory, mutate: surged("c-0"),
			want: want{kind: MoveLeader, member: "c-0", target: "c-1", reason: ReasonMovingLeader}},
		{name: "the successor is a learner catching up: nothing else moves", medium: memory, mutate: func(f *Facts) {
			evictionAsked("c-1")(f)
			f.newMember(3, stewardv1.MemberLearner).Pod = Pod{Exists: true, Ready: true}
			f.addLearner("c-3", false)
		}, want: want{kind: Wait, reason: ReasonLearnerCatchingUp}},
		{name: "another member unhealthy: the add waits for the gate", medium: memory, mutate: func(f *Facts) {
			evictionAsked("c-1")(f)
			f.ep("c-2").Healthy = false
		}, want: want{kind: Wait, reason: ReasonWaitingForHealth, message: "c-1"}},
		{name: "maxSurge 0: prepared for its eviction remove-first, as before", medium: memory, mutate: func(f *Facts) {
			evictionAsked("c-1")(f)
			f.Cluster.Spec.UpdateStrategy.MaxSurge = ptrTo[int32](0)
		}, want: want{kind: PrepareEviction, member: "c-1", reason: ReasonPreparingEviction, disruption: disruption.Evict}},
		{name: "two drained: the earliest request is replaced first", medium: memory, mutate: evictionAsked("c-2", "c-1"),
			want: want{kind: CreateMember, member: "c-3", reason: ReasonPreparingEviction, message: "replacing c-2"}},
		{name: "two drained at the same instant: the lowest ordinal first", medium: memory, mutate: func(f *Facts) {
			f.m("c-2").Pod.EvictionRequested = f.Now
			f.m("c-1").Pod.EvictionRequested = f.Now
		}, want: want{kind: CreateMember, member: "c-3", reason: ReasonPreparingEviction, message: "replacing c-1"}},
		{name: "two drained at the same instant, the successor votes: the lowest ordinal leaves first", n: 4, medium: memory,
			mutate: func(f *Facts) {
				f.setReplicas(3)
				f.m("c-2").Pod.EvictionRequested = f.Now
				f.m("c-1").Pod.EvictionRequested = f.Now
			}, want: want{kind: DeleteMember, member: "c-1", reason: ReasonPreparingEviction}},
		{name: "a drain mid-roll, surged for the roll: the drained member leaves before the outdated ones", n: 4, medium: memory,
			mutate: func(f *Facts) {
				f.setReplicas(3)
				f.retarget(cpu("100m"))
				f.m("c-3").Template = *f.Cluster.Status.Observed.DeepCopy()
				evictionAsked("c-1")(f)
			}, want: want{kind: DeleteMember, member: "c-1", reason: ReasonPreparingEviction}},
		{name: "PVC members are prepared, never surged", mutate: evictionAsked("c-1"),
			want: want{kind: PrepareEviction, member: "c-1", reason: ReasonPreparingEviction, disruption: disruption.Evict}},
	})
}
