package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func TestPointInTimeHold(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 14, 0, 0, 0, time.UTC)
	mt := func(s int) *metav1.Time { return &metav1.Time{Time: t0.Add(time.Duration(s) * time.Second)} }
	c := &stewardv1.ContinuousBackupStatus{Restorable: []stewardv1.RestorableRange{
		{FromRevision: 100, ToRevision: 200, FromTime: mt(0), ToTime: mt(100), Base: "b1"},
		{FromRevision: 300, ToRevision: 400, FromTime: mt(200), ToTime: mt(300), Base: "b2"},
	}}
	rev := func(r int64) *stewardv1.PointInTimeSpec {
		return &stewardv1.PointInTimeSpec{ScheduleName: "s", Revision: ptr.To(r)}
	}
	at := func(s int) *stewardv1.PointInTimeSpec {
		return &stewardv1.PointInTimeSpec{ScheduleName: "s", Time: mt(s)}
	}
	for _, tc := range []struct {
		name string
		c    *stewardv1.ContinuousBackupStatus
		p    *stewardv1.PointInTimeSpec
		want string
	}{
		{"no report yet: the fetch decides", nil, rev(5), ""},
		{"in the first range", c, rev(150), ""},
		{"a range's ends", c, rev(400), ""},
		{"in the hole", c, rev(250), "revision 250 is not restorable: the restorable ranges are revisions 100-200"},
		{"before the first base", c, rev(50), "is not restorable"},
		{"past the durable end: wait", c, rev(401), "revision 401 is not durable yet"},
		{"a time in a range", c, at(50), ""},
		{"a time in the hole", c, at(150), "is not restorable"},
		{"a time past the end: wait", c, at(301), "is not durable yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := pointInTimeHold(tc.c, tc.p)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("hold %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRestoredRevision(t *testing.T) {
	pod := func(name string, code int32, msg string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{Name: name,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}}}}}}
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want int64
	}{
		{pod("restore-fetch", 0, `{"revision":1234,"skipped":false,"base":"b1"}`), 1234},
		{pod("restore-fetch", 0, "log line\n"+`{"revision":77}`), 77},
		{pod("restore-fetch", 0, `{"skipped":true,"path":"/var/lib/etcd/data/member"}`), 0},
		{pod("restore-fetch", 1, `{"error":"no"}`), 0},
		{pod("restore", 0, `{"revision":5}`), 0},
	} {
		if got := restoredRevision(&observed{pods: map[string]*corev1.Pod{"db-0": tc.pod}}); got != tc.want {
			t.Errorf("restoredRevision(%s) = %d, want %d", tc.pod.Status.InitContainerStatuses[0].State.Terminated.Message, got, tc.want)
		}
	}
}

func TestLowestDurable(t *testing.T) {
	now := time.Now()
	sched := func(cluster string, continuous bool, durable int64, ago time.Duration) stewardv1.EtcdBackupSchedule {
		s := stewardv1.EtcdBackupSchedule{Spec: stewardv1.EtcdBackupScheduleSpec{Template: stewardv1.EtcdBackupSpec{ClusterName: cluster}}}
		if continuous {
			s.Spec.Continuous = &stewardv1.ContinuousBackupSpec{}
		}
		s.Status.Continuous = &stewardv1.ContinuousBackupStatus{DurableRevision: durable, ReportedAt: &metav1.Time{Time: now.Add(-ago)}}
		return s
	}
	for _, tc := range []struct {
		name string
		s    []stewardv1.EtcdBackupSchedule
		want int64
	}{
		{"none", nil, 0},
		{"one running", []stewardv1.EtcdBackupSchedule{sched("db", true, 500, time.Second)}, 500},
		{"the lowest of two", []stewardv1.EtcdBackupSchedule{sched("db", true, 500, time.Second), sched("db", true, 300, time.Second)}, 300},
		{"another cluster's", []stewardv1.EtcdBackupSchedule{sched("other", true, 100, time.Second)}, 0},
		{"continuous turned off", []stewardv1.EtcdBackupSchedule{sched("db", false, 100, time.Second)}, 0},
		{"not heard from in 3 minutes: not running", []stewardv1.EtcdBackupSchedule{sched("db", true, 100, 3*time.Minute)}, 0},
		{"nothing durable yet", []stewardv1.EtcdBackupSchedule{sched("db", true, 0, time.Second)}, 0},
	} {
		if got := lowestDurable(tc.s, "db", now); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
