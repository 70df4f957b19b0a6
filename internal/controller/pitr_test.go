package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

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
