package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
)

func TestStillDraining(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 10, 500e6, time.UTC)
	pod := func(label string, drained time.Time, started time.Time) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{stewardv1.LabelVoter: label},
			Annotations: map[string]string{stewardv1.AnnotationDrainingSince: drained.Format(time.RFC3339Nano)}}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "etcd",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}}
		return p
	}
	old := now.Add(-time.Hour)
	for _, tc := range []struct {
		name string
		p    *corev1.Pod
		want bool
	}{
		{"drained 2 s ago, the old container still runs", pod(resources.VoterDraining, now.Add(-2*time.Second), old), true},
		{"drained 2 s ago, the container restarted since", pod(resources.VoterDraining, now.Add(-2*time.Second), now.Add(-time.Second)), false},
		{"drained long ago (a defragmentation): back in the Service", pod(resources.VoterDraining, now.Add(-time.Minute), old), false},
		{"not drained", pod("true", now.Add(-2*time.Second), old), false},
		{"no time recorded", func() *corev1.Pod {
			p := pod(resources.VoterDraining, now, old)
			p.Annotations = nil
			return p
		}(), false},
	} {
		if got := stillDraining(tc.p, now); got != tc.want {
			t.Errorf("%s: stillDraining = %v, want %v", tc.name, got, tc.want)
		}
	}
}
