package plan

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
)

// TestPlanRollout: issue 5, one step of the rollout engine per state.
func TestPlanRollout(t *testing.T) {
	outdated := func(f *Facts) { f.retarget(cpu("100m")) }
	runPlanCases(t, []planCase{
		{name: "pvc: restart the highest follower", mutate: outdated,
			want: want{kind: DeletePod, member: "c-2", reason: ReasonRollingMember, disruption: disruption.Restart}},
		{name: "memory: the highest follower replaced add-first: a member on the target beside it", medium: memory, mutate: outdated,
			want: want{kind: CreateMember, member: "c-3", reason: ReasonRollingMember, message: "replacing c-2 add-first"}},
		{name: "5 members: highest first", n: 5, mutate: outdated,
			want: want{kind: DeletePod, member: "c-4", disruption: disruption.Restart}},
		{name: "an unready outdated member goes first", n: 5, mutate: func(f *Facts) {
			outdated(f)
			f.m("c-1").Pod.Ready = false
		}, want: want{kind: DeletePod, member: "c-1", disruption: disruption.Restart}},
		{name: "an unhealthy (Pod ready) outdated member goes first", n: 5, mutate: func(f *Facts) {
			outdated(f)
			f.ep("c-2").Healthy = false
		}, want: want{kind: DeletePod, member: "c-2", disruption: disruption.Restart}},
		{name: "leader last, handed to the lowest-ordinal updated voter", n: 5, mutate: func(f *Facts) {
			outdated(f)
			for _, n := range []string{"c-1", "c-2", "c-3", "c-4"} {
				cpu("100m")(&f.m(n).Template)
			}
		}, want: want{kind: MoveLeader, member: "c-0", target: "c-1", reason: ReasonMovingLeader}},
		{name: "leader in the middle is skipped until last", n: 5, mutate: func(f *Facts) {
			outdated(f)
			f.lead("c-2")
			for _, n := range []string{"c-3", "c-4"} {
				cpu("100m")(&f.m(n).Template)
			}
		}, want: want{kind: DeletePod, member: "c-1", disruption: disruption.Restart}},
		{name: "no updated voter to take over: the lowest healthy one does", mutate: func(f *Facts) {
			outdated(f)
			f.setReplicas(1)
		}, want: want{kind: MoveLeader, member: "c-0", target: "c-1"}},
		{name: "the gate holds the next member until the last one caught up", mutate: func(f *Facts) {
			outdated(f)
			cpu("100m")(&f.m("c-2").Template)
			f.ep("c-2").AppliedIndex = 0
		}, want: want{kind: Wait, reason: ReasonWaitingForHealth, message: "AppliedIndex"}},
		{name: "the gate needs a linearizable read through the rolled member", mutate: func(f *Facts) {
			outdated(f)
			cpu("100m")(&f.m("c-2").Template)
			f.ep("c-2").ReadOK = false
		}, want: want{kind: Wait, reason: ReasonWaitingForHealth, message: "LinearizableRead"}},
		{name: "Pod readiness alone never passes the gate", mutate: func(f *Facts) {
			outdated(f)
			cpu("100m")(&f.m("c-2").Template)
			f.silence("c-2")
		}, want: want{kind: Wait, reason: ReasonWaitingForHealth, message: "EndpointHealthy"}},
		{name: "podMetadata only: patched in place, no disruption", mutate: func(f *Facts) {
			f.retarget(func(t *stewardv1.MemberTemplate) { t.PodMetadata.Labels = map[string]string{"a": "b"} })
		}, want: want{kind: PatchPodMetadata, member: "c-0", reason: ReasonPatchingPodMetadata}},
		{name: "podMetadata with a roll: the roll carries it", mutate: func(f *Facts) {
			f.retarget(func(t *stewardv1.MemberTemplate) { t.PodMetadata.Annotations = map[string]string{"a": "b"} })
			outdated(f)
		}, want: want{kind: DeletePod, member: "c-2", disruption: disruption.Restart}},
		{name: "retentionPolicy touches no member: adopted, then nothing", mutate: func(f *Facts) {
			f.retarget(func(t *stewardv1.MemberTemplate) { t.Storage.RetentionPolicy = stewardv1.RetentionDelete })
		}, want: want{kind: Nothing, reason: ReasonReconciled}},
		{name: "OnDelete marks only", mutate: func(f *Facts) {
			outdated(f)
			f.Cluster.Spec.UpdateStrategy.Type = stewardv1.OnDelete
		}, want: want{kind: Nothing}},
		{name: "OnDelete: a deleted Pod comes back on the new template", mutate: func(f *Facts) {
			outdated(f)
			f.Cluster.Spec.UpdateStrategy.Type = stewardv1.OnDelete
			f.podGone("c-1")
		}, want: want{kind: CreatePod, member: "c-1"}},
		{name: "single pvc member without opt-in: blocked", n: 1, mutate: outdated,
			want: want{kind: Wait, reason: ReasonBlocked, message: "allowDowntime"}},
		{name: "single pvc member with opt-in: restarted", n: 1, mutate: func(f *Facts) {
			outdated(f)
			f.Cluster.Spec.UpdateStrategy.AllowDowntime = true
		}, want: want{kind: DeletePod, member: "c-0", disruption: disruption.Restart}},
		{name: "single memory member: never", n: 1, medium: memory, mutate: func(f *Facts) {
			outdated(f)
			f.Cluster.Spec.UpdateStrategy.AllowDowntime = true
		}, want: want{kind: Wait, reason: ReasonBlocked, message: "memory"}},
		{name: "single memory member asked to grow: scaling is the way out", n: 1, medium: memory, mutate: func(f *Facts) {
			outdated(f)
			f.setReplicas(3)
		}, want: want{kind: CreateMember, member: "c-1", reason: ReasonScalingUp}},
		{name: "two members: blocked", n: 2, mutate: outdated,
			want: want{kind: Wait, reason: ReasonBlocked, message: "QuorumAtRisk"}},
		{name: "pending scale-down: its victims are not rolled", n: 5, mutate: func(f *Facts) {
			outdated(f)
			f.setReplicas(3)
		}, want: want{kind: DeletePod, member: "c-2", disruption: disruption.Restart}},
		{name: "roll before scale-up", mutate: func(f *Facts) { outdated(f); f.setReplicas(5) },
			want: want{kind: DeletePod, member: "c-2", disruption: disruption.Restart}},
		{name: "a spec edit waits while a Pod is on its way out", mutate: func(f *Facts) {
			f.Cluster.Spec.Version = "3.5.33"
			f.m("c-2").Pod.Deleting = true
		}, want: want{kind: Wait, reason: ReasonWaitingForPodDeletion}},
		{name: "a spec edit waits while a learner catches up", mutate: func(f *Facts) {
			f.Cluster.Spec.Version = "3.5.33"
			f.setReplicas(4)
			f.newMember(3, stewardv1.MemberLearner).Pod = Pod{Exists: true, Ready: true}
			f.addLearner("c-3", false)
		}, want: want{kind: Wait, reason: ReasonLearnerCatchingUp}},
		{name: "a skipped minor is not adopted; the current target rolls on", mutate: func(f *Facts) {
			f.retarget(func(t *stewardv1.MemberTemplate) { t.Version = "3.6.12" })
			f.Cluster.Spec.Version = "3.7.0"
		}, want: want{kind: DeletePod, member: "c-2", reason: ReasonRollingMember, disruption: disruption.Restart}},
		{name: "paused: nothing, and says what is next", mutate: func(f *Facts) { outdated(f); f.Cluster.Spec.Paused = true },
			want: want{kind: Wait, reason: ReasonPaused, message: "DeletePod c-2"}},
		{name: "paused stops repairs too", mutate: func(f *Facts) { f.podGone("c-1"); f.Cluster.Spec.Paused = true },
			want: want{kind: Wait, reason: ReasonPaused, message: "CreatePod c-1"}},
	})
}

// TestPlanHousekeeping: issue 5, storage.size growth.
func TestPlanHousekeeping(t *testing.T) {
	grow := func(f *Facts) {
		f.retarget(func(t *stewardv1.MemberTemplate) { t.Storage.Size = quantity("8Gi") })
		for i := range f.Members {
			f.Members[i].PVC.Resizable = true
		}
	}
	runPlanCases(t, []planCase{
		{name: "expand the first PVC", mutate: grow, want: want{kind: ExpandPVC, member: "c-0", reason: ReasonExpandingStorage}},
		{name: "one at a time", mutate: func(f *Facts) {
			grow(f)
			f.m("c-0").PVC.Requested = resource.MustParse("8Gi")
		}, want: want{kind: Wait, reason: ReasonExpandingStorage, message: "c-0"}},
		{name: "next once the first grew", mutate: func(f *Facts) {
			grow(f)
			f.m("c-0").PVC.Requested, f.m("c-0").PVC.Capacity = resource.MustParse("8Gi"), resource.MustParse("8Gi")
		}, want: want{kind: ExpandPVC, member: "c-1"}},
		{name: "filesystem waits for a restart: through the gate and the chokepoint", mutate: func(f *Facts) {
			grow(f)
			f.m("c-1").PVC.Requested = resource.MustParse("8Gi")
			f.m("c-1").PVC.FileSystemResizePending = true
		}, want: want{kind: DeletePod, member: "c-1", reason: ReasonResizingFilesystem, disruption: disruption.Restart}},
		{name: "filesystem resize of the leader: hand off first", mutate: func(f *Facts) {
			grow(f)
			f.m("c-0").PVC.Requested = resource.MustParse("8Gi")
			f.m("c-0").PVC.FileSystemResizePending = true
		}, want: want{kind: MoveLeader, member: "c-0", target: "c-1"}},
		{name: "StorageClass cannot expand: reported, nothing disrupted", mutate: func(f *Facts) {
			grow(f)
			for i := range f.Members {
				f.Members[i].PVC.Resizable = false
			}
		}, want: want{kind: Wait, reason: ReasonStorageNotExpandable, message: "does not allow"}},
		{name: "memory: size is a roll, not an expansion", medium: memory, mutate: grow,
			want: want{kind: CreateMember, member: "c-3", reason: ReasonRollingMember}},
		{name: "healthy and current: nothing", want: want{kind: Nothing, reason: ReasonReconciled}},
	})
}

// TestRollOrder: victim order is unready first, then followers by highest ordinal, leader last.
func TestRollOrder(t *testing.T) {
	tests := []struct {
		name   string
		n      int32
		mutate func(f *Facts)
		want   string
	}{
		{name: "leader c-0", n: 5, want: "c-4,c-3,c-2,c-1,c-0"},
		{name: "leader c-3", n: 5, mutate: func(f *Facts) { f.lead("c-3") }, want: "c-4,c-2,c-1,c-0,c-3"},
		{name: "unready first, highest first among them", n: 5, mutate: func(f *Facts) {
			f.m("c-1").Pod.Ready = false
			f.ep("c-3").Healthy = false
		}, want: "c-3,c-1,c-4,c-2,c-0"},
		{name: "updated members are not in it", n: 3, mutate: func(f *Facts) { cpu("1")(&f.m("c-1").Template) },
			want: "c-2,c-0"},
		{name: "scale-down victims are not in it", n: 5, mutate: func(f *Facts) { f.setReplicas(3) }, want: "c-2,c-1,c-0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := healthyFacts(t, tt.n, "")
			f.retarget(cpu("1"))
			if tt.mutate != nil {
				tt.mutate(&f)
			}
			d := Plan(f)
			if got := strings.Join(d.Order, ","); got != tt.want {
				t.Errorf("order = %s, want %s", got, tt.want)
			}
			if d.Rollout == nil {
				t.Fatalf("no rollout status while members are outdated")
			}
			shown := d.Rollout.Pending
			if d.Rollout.Member != "" {
				shown = append([]string{d.Rollout.Member}, shown...)
			}
			if got := strings.Join(shown, ","); got != tt.want {
				t.Errorf("rollout status shows %s, want %s", got, tt.want)
			}
		})
	}
}

func TestProgressDeadline(t *testing.T) {
	f := healthyFacts(t, 3, "")
	f.retarget(cpu("1"))
	cpu("1")(&f.m("c-2").Template)
	f.ep("c-2").AppliedIndex = 0
	stepAgo(&f, 11*time.Minute)
	d := Plan(f)
	if !d.DeadlineExceeded {
		t.Fatalf("11 minutes on one step must exceed the default 600s deadline")
	}
	if c := d.Condition(ConditionProgressing); c.Status != "False" || c.Reason != string(ReasonProgressDeadlineExceeded) {
		t.Errorf("Progressing = %+v", c)
	}
	if d.Action.Kind != Wait {
		t.Errorf("the engine keeps trying (waiting) past the deadline, got %s", d.Action)
	}
	f.Cluster.Spec.ProgressDeadlineSeconds = ptrTo(int32(3600))
	if Plan(f).DeadlineExceeded {
		t.Errorf("a one-hour deadline is not exceeded after 11 minutes")
	}
}

func TestSortForRoll(t *testing.T) {
	r := func(ord int32, available, leader bool) RollRank {
		return RollRank{Ordinal: ord, Ready: available, Leader: leader}
	}
	tests := []struct {
		name string
		in   []RollRank
		want []int32
	}{
		{"followers from the highest ordinal, the leader last", []RollRank{r(0, true, true), r(1, true, false), r(2, true, false)}, []int32{2, 1, 0}},
		{"unavailable first, whatever their ordinal", []RollRank{r(0, false, false), r(1, true, false), r(2, true, false)}, []int32{0, 2, 1}},
		{"an unavailable leader is not kept for last", []RollRank{r(0, true, false), r(1, false, true), r(2, true, false)}, []int32{1, 2, 0}},
		{"two unavailable: highest ordinal first", []RollRank{r(0, false, false), r(3, false, false), r(2, true, true)}, []int32{3, 0, 2}},
		{"none", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			SortForRoll(tt.in, func(x RollRank) RollRank { return x })
			var got []int32
			for _, x := range tt.in {
				got = append(got, x.Ordinal)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("order %v, want %v", got, tt.want)
			}
		})
	}
}
