package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/backupjob"
)

func TestRestoredRevision(t *testing.T) {
	fetch := corev1.Container{Name: backupjob.RestoreFetchContainer}
	pod := func(name string, code int32, msg string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: name}}},
			Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{Name: name,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}}}}}}
	}
	running := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{fetch}},
		Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{Name: fetch.Name,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	noStatus := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{fetch}}}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		want    int64
		pending bool
	}{
		{"result", pod(fetch.Name, 0, `{"revision":1234,"skipped":false,"base":"b1"}`), 1234, false},
		{"result after a log line", pod(fetch.Name, 0, "log line\n"+`{"revision":77}`), 77, false},
		{"skipped", pod(fetch.Name, 0, `{"skipped":true,"path":"/var/lib/etcd/data/member"}`), 0, false},
		{"failed", pod(fetch.Name, 1, `{"error":"no"}`), 0, false},
		{"another container", pod(backupjob.RestoreContainer, 0, `{"revision":5}`), 0, false},
		{"fetch still running", running, 0, true},
		{"status not posted yet", noStatus, 0, true},
		{"Pod without a fetch", &corev1.Pod{}, 0, false},
	} {
		got, pending := restoredRevision(&observed{pods: map[string]*corev1.Pod{"db-0": tc.pod}})
		if got != tc.want || pending != tc.pending {
			t.Errorf("%s: restoredRevision = %d, pending %v; want %d, %v", tc.name, got, pending, tc.want, tc.pending)
		}
	}
}

// A time target's revision comes only from the seed's fetch result: the restore is not recorded
// (with revision 0, for good) while the member answers but its Pod's status lags behind.
func TestSetRestoreStatusWaitsForTheFetchResult(t *testing.T) {
	r := &EtcdClusterReconciler{}
	ec := &stewardv1.EtcdCluster{Spec: stewardv1.EtcdClusterSpec{Bootstrap: &stewardv1.BootstrapSpec{Restore: &stewardv1.RestoreSpec{
		PointInTime: &stewardv1.PointInTimeSpec{ScheduleName: "s", Time: &metav1.Time{Time: time.Unix(1e9, 0)}}}}}}
	ec.Status.ClusterID = "abc"
	src := &restoreSource{name: "schedule s at 2001-09-09T01:46:40Z", pitr: &backupjob.PointInTime{ToTime: "2001-09-09T01:46:40Z"}}
	fetch := corev1.Container{Name: backupjob.RestoreFetchContainer}
	seed := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{fetch}}}
	o := &observed{restore: src, pods: map[string]*corev1.Pod{"db-0": seed}}

	r.setRestoreStatus(ec, o)
	if ec.Status.Restore != nil {
		t.Fatalf("recorded %+v before the fetch result was seen", ec.Status.Restore)
	}
	seed.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: fetch.Name, State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{Message: `{"revision":4321,"skipped":false}`}}}}
	r.setRestoreStatus(ec, o)
	if ec.Status.Restore == nil || ec.Status.Restore.Revision != 4321 || ec.Status.Restore.Source != src.name {
		t.Fatalf("status.restore %+v, want revision 4321 from %q", ec.Status.Restore, src.name)
	}

	// The seed replaced since (its result gone): recorded, saying the revision is unknown.
	ec.Status.Restore, ec.Status.Conditions = nil, nil
	o.pods = map[string]*corev1.Pod{"db-0": {}}
	r.setRestoreStatus(ec, o)
	c := meta.FindStatusCondition(ec.Status.Conditions, ConditionRestored)
	if ec.Status.Restore == nil || c == nil || !strings.Contains(c.Message, "revision unknown") {
		t.Fatalf("status.restore %+v, condition %+v; want recorded with the revision unknown", ec.Status.Restore, c)
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
