package plan

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
)

const mib = int64(1) << 20

// sizes sets a member's backend file and in-use sizes, in MiB.
func sizes(name string, size, inUse int64) func(f *Facts) {
	return func(f *Facts) {
		e := f.ep(name)
		e.DBSize, e.DBSizeInUse = size*mib, inUse*mib
	}
}

func all(muts ...func(f *Facts)) func(f *Facts) {
	return func(f *Facts) {
		for _, m := range muts {
			m(f)
		}
	}
}

func defragSpec(edit func(d *stewardv1.DefragmentationSpec)) func(f *Facts) {
	return func(f *Facts) {
		if f.Cluster.Spec.Maintenance == nil {
			f.Cluster.Spec.Maintenance = &stewardv1.MaintenanceSpec{}
		}
		edit(&f.Cluster.Spec.Maintenance.Defragmentation)
	}
}

func lastDefrag(name string, outcome stewardv1.DefragmentationOutcome, ago time.Duration, failures int32) func(f *Facts) {
	return func(f *Facts) {
		at := metav1.NewTime(f.Now.Add(-ago))
		d := &stewardv1.MemberDefragmentation{Last: &stewardv1.DefragmentationResult{Time: at, Outcome: outcome, Message: "context deadline exceeded"},
			ConsecutiveFailures: failures}
		if outcome == stewardv1.DefragmentationSucceeded {
			d.LastSucceeded = &at
		}
		f.m(name).Defrag = d
	}
}

// c-0 leads healthyFacts' clusters.
func TestPlanDefragmentation(t *testing.T) {
	fragmented := all(sizes("c-0", 300, 50), sizes("c-1", 200, 50), sizes("c-2", 400, 50))
	tests := []struct {
		name   string
		n      int32
		medium stewardv1.StorageMedium
		mutate func(f *Facts)
		want   want
	}{
		{name: "nothing fragmented: settled", mutate: all(sizes("c-0", 300, 290), sizes("c-1", 300, 290), sizes("c-2", 300, 290)),
			want: want{kind: Nothing}},
		{name: "most fragmented follower first", mutate: fragmented,
			want: want{kind: Defragment, member: "c-2", reason: ReasonDefragmenting, disruption: disruption.Defragment,
				message: "defragmenting c-2 (Threshold: 50Mi of 400Mi in use)"}},
		{name: "then the other follower", mutate: all(fragmented, sizes("c-2", 50, 50)),
			want: want{kind: Defragment, member: "c-1", disruption: disruption.Defragment}},
		{name: "the leader last, after moving leadership away", mutate: all(fragmented, sizes("c-1", 50, 50), sizes("c-2", 50, 50)),
			want: want{kind: MoveLeader, member: "c-0", target: "c-1", reason: ReasonMovingLeader, message: "before defragmenting it"}},
		{name: "below 45% free: not due", mutate: sizes("c-1", 200, 111), want: want{kind: Nothing}},
		{name: "exactly 45% free: due", mutate: sizes("c-1", 200, 110),
			want: want{kind: Defragment, member: "c-1", disruption: disruption.Defragment}},
		{name: "below 100Mi: not worth a disruption", mutate: sizes("c-1", 99, 1), want: want{kind: Nothing}},
		{name: "thresholds are configurable", mutate: all(sizes("c-1", 20, 15),
			defragSpec(func(d *stewardv1.DefragmentationSpec) {
				d.FragmentationPercent, d.MinDBSize = ptr.To[int32](20), ptr.To(resource.MustParse("16Mi"))
			})),
			want: want{kind: Defragment, member: "c-1", disruption: disruption.Defragment}},
		{name: "enabled: false turns it off", mutate: all(fragmented,
			defragSpec(func(d *stewardv1.DefragmentationSpec) { d.Enabled = ptr.To(false) })), want: want{kind: Nothing}},
		{name: "the schedule defragments a member whatever its fragmentation",
			mutate: func(f *Facts) { f.m("c-1").DefragScheduled = true; sizes("c-1", 10, 9)(f) },
			want:   want{kind: Defragment, member: "c-1", disruption: disruption.Defragment, message: "Schedule"}},
		{name: "a request defragments a member whatever its fragmentation",
			mutate: func(f *Facts) { f.m("c-1").DefragRequested = true; sizes("c-1", 10, 9)(f) },
			want:   want{kind: Defragment, member: "c-1", disruption: disruption.Defragment, message: "Requested"}},
		{name: "a request is honoured with enabled: false (which stops only Steward's own decisions)", mutate: all(fragmented,
			defragSpec(func(d *stewardv1.DefragmentationSpec) { d.Enabled = ptr.To(false) }),
			func(f *Facts) { f.m("c-0").DefragRequested = true }),
			want: want{kind: MoveLeader, member: "c-0", target: "c-1", reason: ReasonMovingLeader, message: "before defragmenting it"}},
		{name: "a request for every member: followers first", mutate: func(f *Facts) {
			for _, n := range []string{"c-0", "c-1", "c-2"} {
				f.m(n).DefragRequested = true
				sizes(n, 10, 9)(f)
			}
		}, want: want{kind: Defragment, member: "c-2", disruption: disruption.Defragment, message: "Requested"}},
		{name: "waits for the recovery gate", mutate: all(fragmented, func(f *Facts) { f.ep("c-1").ReadOK = false }),
			want: want{kind: Wait, reason: ReasonWaitingForHealth}},
		{name: "never while another member is down: its repair comes first", mutate: all(fragmented, func(f *Facts) { f.podGone("c-1") }),
			want: want{kind: CreatePod, member: "c-1"}},
		{name: "a roll comes first", mutate: all(fragmented, func(f *Facts) { f.retarget(cpu("1")) }),
			want: want{kind: DeletePod, member: "c-2", reason: ReasonRollingMember, disruption: disruption.Restart}},
		{name: "not again within 10 minutes of a success", mutate: all(sizes("c-1", 200, 50),
			lastDefrag("c-1", stewardv1.DefragmentationSucceeded, 9*time.Minute, 0)), want: want{kind: Nothing}},
		{name: "again after 10 minutes", mutate: all(sizes("c-1", 200, 50),
			lastDefrag("c-1", stewardv1.DefragmentationSucceeded, 11*time.Minute, 0)),
			want: want{kind: Defragment, member: "c-1", disruption: disruption.Defragment}},
		{name: "after 2 failures a member waits 2 minutes", mutate: all(sizes("c-1", 200, 50),
			lastDefrag("c-1", stewardv1.DefragmentationFailed, 90*time.Second, 2)), want: want{kind: Nothing}},
		{name: "and then tries again", mutate: all(sizes("c-1", 200, 50),
			lastDefrag("c-1", stewardv1.DefragmentationFailed, 121*time.Second, 2)),
			want: want{kind: Defragment, member: "c-1", disruption: disruption.Defragment}},
		{name: "a backing-off member lets the next one go", mutate: all(sizes("c-1", 200, 50), sizes("c-2", 200, 60),
			lastDefrag("c-2", stewardv1.DefragmentationFailed, time.Minute, 6)),
			want: want{kind: Defragment, member: "c-1", disruption: disruption.Defragment}},
		{name: "a single member only with allowDowntime", n: 1, mutate: sizes("c-0", 300, 10), want: want{kind: Nothing}},
		{name: "a single member with allowDowntime", n: 1, mutate: all(sizes("c-0", 300, 10),
			func(f *Facts) { f.Cluster.Spec.UpdateStrategy.AllowDowntime = true }),
			want: want{kind: Defragment, member: "c-0", disruption: disruption.Defragment}},
		{name: "memory members are defragmented in place (their data stays)", medium: stewardv1.StorageMediumMemory,
			mutate: sizes("c-2", 300, 10), want: want{kind: Defragment, member: "c-2", disruption: disruption.Defragment}},
		{name: "an interrupted defragmentation is closed once the member serves", mutate: func(f *Facts) {
			f.m("c-1").Defrag = &stewardv1.MemberDefragmentation{StartedAt: ptr.To(metav1.NewTime(f.Now.Add(-time.Minute)))}
		}, want: want{kind: RecordDefragmentation, member: "c-1", reason: ReasonDefragmentationInterrupted}},
		{name: "until then the member counts as disrupted: nothing else goes", mutate: all(fragmented, func(f *Facts) {
			f.m("c-1").Defrag = &stewardv1.MemberDefragmentation{StartedAt: ptr.To(metav1.NewTime(f.Now.Add(-time.Minute)))}
			f.ep("c-1").ReadOK = false
			f.retarget(cpu("1"))
		}), want: want{kind: Wait, reason: ReasonDefragmenting, message: "c-1 is defragmenting"}},
		{name: "a gone member's record is closed before its repair (defragstop_test.go)", mutate: func(f *Facts) {
			f.m("c-1").Defrag = &stewardv1.MemberDefragmentation{StartedAt: ptr.To(metav1.NewTime(f.Now.Add(-time.Minute)))}
			f.podGone("c-1")
		}, want: want{kind: RecordDefragmentation, member: "c-1", reason: ReasonDefragmentationInterrupted, message: "its Pod is gone"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkAction(t, planFor(t, tt.n, tt.medium, tt.mutate), tt.want)
		})
	}
}

func TestDefragmentationStatus(t *testing.T) {
	d := planFor(t, 3, "", all(sizes("c-1", 200, 50), func(f *Facts) {
		f.m("c-1").Template.Options.QuotaBackendBytes = ptr.To(resource.MustParse("400Mi"))
		nospace("c-1")(f)
		lastDefrag("c-2", stewardv1.DefragmentationFailed, time.Second, 3)(f)
	}))
	var c1 stewardv1.MemberStatus
	for _, m := range d.Members {
		if m.Name == "c-1" {
			c1 = m
		}
	}
	if c1.DBSize.String() != "200Mi" || c1.DBSizeInUse.String() != "50Mi" || c1.Quota.String() != "400Mi" ||
		*c1.QuotaUsedPercent != 50 || strings.Join(c1.Alarms, ",") != "NOSPACE" {
		t.Errorf("c-1 status = %+v", c1)
	}
	deg := d.Condition(ConditionDegraded)
	if deg.Status != "True" || !strings.Contains(deg.Message, "c-2: defragmentation failed 3 times in a row, last: context deadline exceeded") {
		t.Errorf("Degraded = %+v", deg)
	}
	d = planFor(t, 3, "", func(f *Facts) { f.DefragScheduleError = `schedule "99 3 * * *": the minute field "99" is invalid` })
	if deg := d.Condition(ConditionDegraded); deg.Reason != string(ReasonInvalidDefragmentationSchedule) || !strings.Contains(deg.Message, `"99" is invalid`) {
		t.Errorf("bad schedule: Degraded = %+v", deg)
	}
	d = planFor(t, 3, "", lastDefrag("c-2", stewardv1.DefragmentationFailed, time.Second, 2))
	if deg := d.Condition(ConditionDegraded); deg.Status != "False" {
		t.Errorf("2 failures: Degraded = %+v", deg)
	}
}
