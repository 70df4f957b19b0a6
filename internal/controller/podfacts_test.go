package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/datacheck"
	"github.com/etcd-steward/steward/internal/plan"
	"github.com/etcd-steward/steward/internal/resources"
)

// podFacts is the plan's only view of a Pod: each kubelet report maps to the fact the planner
// decides on (a wrong mapping here is a wrong decision there, whatever the plan's tests say).
func TestPodFacts(t *testing.T) {
	at := metav1.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	old, later := metav1.NewTime(at.Add(-30*24*time.Hour)), metav1.NewTime(at.Add(time.Hour))
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
			p.Annotations = map[string]string{stewardv1.AnnotationRestartedFrom: "containerd://a"}
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
			p.Annotations = map[string]string{stewardv1.AnnotationForceNewCluster: "true"}
		}), func(f plan.Pod) bool { return f.ForceNewCluster }},
		// Restarts long past: the count stays (the crash-loop rule weighs it with the last
		// termination's time), but a container running again is neither stopped nor backing off.
		{"old restarts, running again", pod(func(p *corev1.Pod) {
			etcd(p).RestartCount = 12
			etcd(p).LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 2, FinishedAt: old}
		}), func(f plan.Pod) bool {
			return f.RestartCount == 12 && !f.Stopped && !f.BackOff && f.Ready && f.ContainerReady &&
				f.LastTerminationReason == "Error" && f.LastTerminatedAt.Equal(old.Time) && f.DataLost == "" && f.VersionRefused == ""
		}},
		{"OOM-killed last time", pod(func(p *corev1.Pod) {
			etcd(p).RestartCount = 1
			etcd(p).LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137, FinishedAt: at}
		}), func(f plan.Pod) bool {
			return f.LastTerminationReason == "OOMKilled" && f.RestartCount == 1 && !f.BackOff
		}},
		// Only the kubelet's CrashLoopBackOff is a back-off; any other wait is a stopped container.
		{"waiting for another reason", pod(func(p *corev1.Pod) {
			etcd(p).State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
		}), func(f plan.Pod) bool { return f.Stopped && !f.BackOff }},
		{"image pull back-off is not a crash loop", pod(func(p *corev1.Pod) {
			etcd(p).State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}
		}), func(f plan.Pod) bool { return f.Stopped && !f.BackOff }},
		{"the back-off of a sidecar is not etcd's", pod(func(p *corev1.Pod) {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "sidecar", RestartCount: 9,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}})
		}), func(f plan.Pod) bool { return !f.BackOff && !f.Stopped && f.RestartCount == 0 }},
		// Ready flips: becoming ready clears the time, becoming unready again starts a new one.
		{"ready again after being unready", pod(func(p *corev1.Pod) { p.Status.Conditions[0].LastTransitionTime = later }),
			func(f plan.Pod) bool { return f.Ready && f.NotReadySince.IsZero() }},
		{"unready again: since the latest flip", pod(func(p *corev1.Pod) {
			p.Status.Conditions[0].Status, p.Status.Conditions[0].LastTransitionTime = corev1.ConditionFalse, later
		}), func(f plan.Pod) bool { return !f.Ready && f.NotReadySince.Equal(later.Time) }},
		{"Ready Unknown (node lost) is not ready", pod(func(p *corev1.Pod) {
			p.Status.Conditions[0].Status, p.Status.Conditions[0].LastTransitionTime = corev1.ConditionUnknown, later
		}), func(f plan.Pod) bool { return !f.Ready && f.NotReadySince.Equal(later.Time) }},
		// The Pod's readiness and the container's are reported apart.
		{"container ready, Pod not (yet)", pod(func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }),
			func(f plan.Pod) bool { return !f.Ready && f.ContainerReady }},
		// A join refused by every peer (an adopted source's peer rules): read while the container
		// is down, forgotten while it runs again (its peers may admit it now).
		{"join refused, backing off", pod(func(p *corev1.Pod) {
			etcd(p).State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
			etcd(p).LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: datacheck.ExitJoinRefused,
				Message: datacheck.MessagePrefix + datacheck.JoinRefused + ": tls: bad certificate", Reason: "Error", FinishedAt: at}
		}), func(f plan.Pod) bool {
			return f.JoinRefused == "tls: bad certificate" && f.DataLost == "" && f.VersionRefused == ""
		}},
		{"join refused, just exited", pod(func(p *corev1.Pod) {
			etcd(p).State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: datacheck.ExitJoinRefused,
				Message: datacheck.MessagePrefix + datacheck.JoinRefused + ": tls: bad certificate"}}
		}), func(f plan.Pod) bool { return f.JoinRefused == "tls: bad certificate" && f.DataLost == "" }},
		{"join refused last time, running again", pod(func(p *corev1.Pod) {
			etcd(p).LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: datacheck.ExitJoinRefused,
				Message: datacheck.MessagePrefix + datacheck.JoinRefused + ": tls: bad certificate", FinishedAt: at}
		}), func(f plan.Pod) bool { return f.JoinRefused == "" }},
		{"etcd's exit 5 without the data check's prefix", pod(func(p *corev1.Pod) {
			etcd(p).State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: datacheck.ExitJoinRefused,
				Message: "JoinRefused: tls: bad certificate"}}
		}), func(f plan.Pod) bool { return f.JoinRefused == "" }},
		// Data-check verdicts: the last termination's is read first, the current one's otherwise.
		{"data check's verdict in the last termination", pod(func(p *corev1.Pod) {
			etcd(p).State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
			etcd(p).LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: datacheck.ExitDataLost,
				Message: datacheck.MessagePrefix + "Truncated: the WAL ends early\n", Reason: "Error", FinishedAt: at}
		}), func(f plan.Pod) bool {
			return f.BackOff && f.DataLost == "Truncated: the WAL ends early" && f.VersionRefused == ""
		}},
		{"the last termination's verdict wins over the current one's", pod(func(p *corev1.Pod) {
			etcd(p).State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: datacheck.ExitVersionRefused,
				Message: datacheck.MessagePrefix + "VersionRefused: now"}}
			etcd(p).LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: datacheck.ExitDataLost,
				Message: datacheck.MessagePrefix + "Empty: before"}
		}), func(f plan.Pod) bool { return f.DataLost == "Empty: before" && f.VersionRefused == "" }},
		{"etcd's own crash last time, the data check's verdict now", pod(func(p *corev1.Pod) {
			etcd(p).State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: datacheck.ExitDataLost,
				Message: datacheck.MessagePrefix + "Empty: now"}}
			etcd(p).LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Message: "panic: x"}
		}), func(f plan.Pod) bool { return f.DataLost == "Empty: now" && f.Stopped }},
		{"the data check's exit code without its message is no verdict", pod(func(p *corev1.Pod) {
			etcd(p).State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: datacheck.ExitDataLost,
				Message: "something else exited 3"}}
		}), func(f plan.Pod) bool { return f.DataLost == "" && f.VersionRefused == "" && f.Stopped }},
		{"the data check's message with another exit code is no verdict", pod(func(p *corev1.Pod) {
			etcd(p).LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137,
				Message: datacheck.MessagePrefix + "Empty: no member"}
		}), func(f plan.Pod) bool { return f.DataLost == "" && f.VersionRefused == "" }},
		// Phases.
		{"Pending, no container yet", pod(func(p *corev1.Pod) {
			p.Status.Phase, p.Status.ContainerStatuses = corev1.PodPending, nil
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
		}), func(f plan.Pod) bool {
			return f.Exists && f.Phase == corev1.PodPending && !f.Failed && !f.Ready && !f.Stopped && !f.Unschedulable &&
				f.ContainerID == "" && f.NotReadySince.Equal(at.Time)
		}},
		{"Succeeded is not Failed", pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
			func(f plan.Pod) bool { return f.Phase == corev1.PodSucceeded && !f.Failed }},
		{"Unknown phase", pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodUnknown }),
			func(f plan.Pod) bool { return f.Phase == corev1.PodUnknown && !f.Failed }},
		{"Failed and deleting", pod(func(p *corev1.Pod) { p.Status.Phase, p.DeletionTimestamp = corev1.PodFailed, &later }),
			func(f plan.Pod) bool { return f.Failed && f.Deleting && f.DeletingSince.Equal(later.Time) }},
		{"not deleting", pod(nil), func(f plan.Pod) bool { return !f.Deleting && f.DeletingSince.IsZero() }},
		{"not scheduled yet for another reason", pod(func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled,
				Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated})
		}), func(f plan.Pod) bool { return !f.Unschedulable }},
		{"force-new-cluster only when true", pod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{stewardv1.AnnotationForceNewCluster: "false"}
		}), func(f plan.Pod) bool { return !f.ForceNewCluster }},
		// What the Pod was built from.
		{"template and revision recorded", pod(func(p *corev1.Pod) {
			resources.SetPodTemplate(p, &stewardv1.MemberTemplate{Version: "3.6.16"})
			p.Annotations[stewardv1.AnnotationPodRevision] = "4"
		}), func(f plan.Pod) bool { return f.Template != nil && f.Template.Version == "3.6.16" && f.Revision == 4 }},
		{"built by an older Steward: no template, revision 1", pod(nil),
			func(f plan.Pod) bool { return f.Template == nil && f.Revision == 1 }},
		{"the resize state comes along", pod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{stewardv1.AnnotationResizeRefused: "forbidden"}
		}), func(f plan.Pod) bool { return f.Resize.Refused == "forbidden" }},
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
