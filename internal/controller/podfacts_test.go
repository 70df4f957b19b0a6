package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-steward/steward/internal/datacheck"
	"github.com/etcd-steward/steward/internal/plan"
	"github.com/etcd-steward/steward/internal/resources"
)

// podFacts is the plan's only view of a Pod: each kubelet report maps to the fact the planner
// decides on (a wrong mapping here is a wrong decision there, whatever the plan's tests say).
func TestPodFacts(t *testing.T) {
	at := metav1.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	pod := func(edit func(p *corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c-0", CreationTimestamp: at, Generation: 2},
			Status: corev1.PodStatus{Phase: corev1.PodRunning,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, ObservedGeneration: 2,
					LastTransitionTime: at}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", ContainerID: "containerd://b", Ready: true,
					State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}}}}}}
		if edit != nil {
			edit(p)
		}
		return p
	}
	etcd := func(p *corev1.Pod) *corev1.ContainerStatus { return &p.Status.ContainerStatuses[0] }
	tests := []struct {
		name  string
		pod   *corev1.Pod
		check func(f plan.Pod) bool
	}{
		{"no Pod", nil, func(f plan.Pod) bool { return !f.Exists && !f.Ready }},
		{"running and ready", pod(nil), func(f plan.Pod) bool {
			return f.Exists && f.Ready && f.NotReadySince.IsZero() && !f.Stopped && !f.BackOff && f.Phase == corev1.PodRunning &&
				f.Generation == 2 && f.ReadyObservedGeneration == 2 && f.ContainerID == "containerd://b" && f.ContainerReady &&
				f.RestartedFrom == ""
		}},
		{"not ready since its transition", pod(func(p *corev1.Pod) {
			p.Status.Conditions[0].Status = corev1.ConditionFalse
			etcd(p).Ready = false
		}), func(f plan.Pod) bool { return !f.Ready && f.NotReadySince.Equal(at.Time) && !f.ContainerReady }},
		{"no Ready condition: unready since created", pod(func(p *corev1.Pod) { p.Status.Conditions = nil }),
			func(f plan.Pod) bool {
				return !f.Ready && f.NotReadySince.Equal(at.Time) && f.ReadyObservedGeneration == 0
			}},
		{"Ready computed for an older generation", pod(func(p *corev1.Pod) { p.Generation = 3 }),
			func(f plan.Pod) bool { return f.Ready && f.Generation == 3 && f.ReadyObservedGeneration == 2 }},
		{"restarted in place from a recorded container", pod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{resources.AnnotationRestartedFrom: "containerd://a"}
		}), func(f plan.Pod) bool { return f.RestartedFrom == "containerd://a" && f.ContainerID == "containerd://b" }},
		{"crash-looping", pod(func(p *corev1.Pod) {
			etcd(p).State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
			etcd(p).RestartCount = 7
			etcd(p).LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1, FinishedAt: at}
		}), func(f plan.Pod) bool {
			return f.BackOff && f.Stopped && f.RestartCount == 7 && f.LastTerminationReason == "Error" &&
				f.LastTerminatedAt.Equal(at.Time) && f.DataLost == ""
		}},
		{"exited, not restarted yet", pod(func(p *corev1.Pod) {
			etcd(p).State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137}}
		}), func(f plan.Pod) bool { return f.Stopped && !f.BackOff }},
		{"refused by the data check", pod(func(p *corev1.Pod) {
			etcd(p).State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: datacheck.ExitDataLost,
				Message: datacheck.MessagePrefix + "Empty: no member"}}
		}), func(f plan.Pod) bool { return f.Stopped && f.DataLost == "Empty: no member" }},
		{"other containers say nothing of etcd", pod(func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].Name = "sidecar"
		}), func(f plan.Pod) bool { return f.ContainerID == "" && !f.ContainerReady && !f.Stopped }},
		{"Failed", pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), func(f plan.Pod) bool { return f.Failed }},
		{"deleting", pod(func(p *corev1.Pod) { p.DeletionTimestamp = &at }),
			func(f plan.Pod) bool { return f.Deleting && f.DeletingSince.Equal(at.Time) }},
		{"unschedulable", pod(func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled,
				Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable})
		}), func(f plan.Pod) bool { return f.Unschedulable }},
		{"a quorum recovery's survivor", pod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{resources.AnnotationForceNewCluster: "true"}
		}), func(f plan.Pod) bool { return f.ForceNewCluster }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if f := podFacts(tt.pod); !tt.check(f) {
				t.Errorf("facts %+v", f)
			}
		})
	}
}

// The in-place restart records the container it restarts, in the same patch as the change.
func TestEtcdContainerID(t *testing.T) {
	p := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
		{Name: "steward-sidecar", ContainerID: "containerd://x"}, {Name: "etcd", ContainerID: "containerd://e"}}}}
	if got := etcdContainerID(p); got != "containerd://e" {
		t.Errorf("etcdContainerID = %q", got)
	}
	if got := etcdContainerID(&corev1.Pod{}); got != "" {
		t.Errorf("no status: %q", got)
	}
}
