package plan

import (
	"testing"

	v1alpha1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/health"
)

func corrupt(names ...string) func(f *Facts) {
	return func(f *Facts) {
		for _, n := range names {
			f.Etcd.Alarms = append(f.Etcd.Alarms, health.Alarm{MemberID: f.live(n).ID, Type: health.AlarmCorrupt})
		}
	}
}

// c-0 leads healthyFacts' clusters.
func TestPlanCorruption(t *testing.T) {
	tests := []struct {
		name   string
		n      int32
		mutate func(f *Facts)
		want   want
	}{
		{name: "one corrupt follower while the others agree: replaced", mutate: corrupt("c-2"),
			want: want{kind: RemoveMember, member: "c-2", reason: ReasonCorrupt, disruption: disruption.Replace}},
		{name: "a corrupt leader hands leadership away first", mutate: corrupt("c-0"),
			want: want{kind: MoveLeader, member: "c-0", target: "c-1", reason: ReasonMovingLeader}},
		{name: "the alarm is raised once per detecting member: still one implicated", mutate: corrupt("c-1", "c-1"),
			want: want{kind: RemoveMember, member: "c-1", disruption: disruption.Replace}},
		{name: "two implicated: nothing is touched", mutate: corrupt("c-1", "c-2"),
			want: want{kind: Wait, reason: ReasonCorruptManual, message: "CORRUPT raised on 2 members (c-1, c-2)"}},
		{name: "the others not all healthy: nothing is touched", mutate: all(corrupt("c-2"), func(f *Facts) { f.ep("c-1").ReadOK = false }),
			want: want{kind: Wait, reason: ReasonCorruptManual, message: "only while the others agree"}},
		{name: "a 2-member cluster cannot spare the corrupt one", n: 2, mutate: corrupt("c-1"),
			want: want{kind: Wait, reason: ReasonBlocked}},
		{name: "removed and cleaned up: disarm before the fresh member is added", mutate: all(corrupt("c-2"), func(f *Facts) {
			id := f.live("c-2").ID
			f.dropLive("c-2")
			f.Etcd.Alarms = []health.Alarm{{MemberID: id, Type: health.AlarmCorrupt}}
			m := f.m("c-2")
			m.Phase, m.ID, m.Replacing, m.Pod, m.PVC = v1alpha1.MemberPending, "", true, Pod{}, PVC{}
		}), want: want{kind: DisarmAlarm, reason: ReasonCorruptReplaced}},
		{name: "NOSPACE recovery stays off while CORRUPT stands", mutate: all(corrupt("c-1", "c-2"), nospace("c-0")),
			want: want{kind: Wait, reason: ReasonCorruptManual}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := planFor(t, tt.n, "", tt.mutate)
			checkAction(t, d, tt.want)
			if tt.want.kind == DisarmAlarm && d.Action.Alarm != health.AlarmCorrupt {
				t.Errorf("disarms %q, want CORRUPT", d.Action.Alarm)
			}
		})
	}
}
