package plan

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/health"
)

// nospace raises NOSPACE on the named members, as every endpoint then reports it (issue 10,
// defect 2: a full quota is an alarm, not members down).
func nospace(names ...string) func(f *Facts) {
	return func(f *Facts) {
		for _, n := range names {
			f.Etcd.Alarms = append(f.Etcd.Alarms, health.Alarm{MemberID: f.live(n).ID, Type: "NOSPACE"})
		}
	}
}

func TestAlarmIsNotQuorumLoss(t *testing.T) {
	const full = "NOSPACE alarm raised on c-0, c-1, c-2: the cluster accepts only reads and deletes; compact, defragment and disarm (etcdctl alarm disarm)"
	tests := []struct {
		name   string
		mutate func(f *Facts)
		want   []condWant
		action want
	}{
		{name: "a full cluster holds quorum and says which alarm, on whom, and what to do",
			mutate: nospace("c-0", "c-1", "c-2"),
			want: []condWant{
				{ConditionAvailable, "True", ReasonQuorumHealthy, "3 of 3 voters healthy"},
				{ConditionDegraded, "True", ReasonAlarm, full},
				{ConditionProgressing, "False", ReasonAlarm, "NOSPACE alarm raised"},
			},
			action: want{kind: Wait, message: "NOSPACE alarm raised on c-0, c-1, c-2"}},
		{name: "no member is rolled while an alarm is active, and the wait says why",
			mutate: func(f *Facts) { nospace("c-1")(f); f.retarget(cpu("1")) },
			want: []condWant{
				{ConditionRollingUpdate, "True", ReasonWaitingForHealth, "NoAlarm: NOSPACE alarm raised on c-1"},
				{ConditionDegraded, "True", ReasonAlarm, "NOSPACE alarm raised on c-1"},
			},
			action: want{kind: Wait, reason: ReasonWaitingForHealth, message: "NOSPACE alarm raised on c-1"}},
		{name: "no scale step either",
			mutate: func(f *Facts) { nospace("c-0")(f); f.setReplicas(5) },
			action: want{kind: Wait, reason: ReasonWaitingForHealth, message: "NOSPACE alarm raised on c-0"}},
		{name: "a member really down is named after the alarm; its Pod still comes back (no disruption)",
			mutate: func(f *Facts) { nospace("c-0", "c-1", "c-2")(f); f.podGone("c-2") },
			want: []condWant{
				{ConditionAvailable, "True", ReasonQuorumHealthy, "2 of 3"},
				{ConditionDegraded, "True", ReasonAlarm, full + "; c-2: Pod missing"},
			},
			action: want{kind: CreatePod, member: "c-2", reason: ReasonMemberPodMissing}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Steward only reporting the alarm (spec.maintenance.nospace Report); recovery is in
			// nospace_test.go.
			d := planFor(t, 3, "", all(tt.mutate, func(f *Facts) {
				f.Cluster.Spec.Maintenance = &stewardv1.MaintenanceSpec{NoSpace: stewardv1.NoSpaceReport}
			}))
			for _, w := range tt.want {
				c := d.Condition(w.typ)
				if c.Status != w.status || c.Reason != string(w.reason) || !strings.Contains(c.Message, w.message) {
					t.Errorf("%s = %s %s %q; want %s %s ~%q", w.typ, c.Status, c.Reason, c.Message, w.status, w.reason, w.message)
				}
			}
			checkAction(t, d, tt.action)
			if c := d.Condition(ConditionAvailable); c.Status != metav1.ConditionTrue {
				t.Errorf("an alarm is not quorum loss: Available = %s %s", c.Status, c.Reason)
			}
		})
	}
}
