package framework

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// A failed wait's one line names what the operator says it waits for and which Pod is stuck how.
func TestBrief(t *testing.T) {
	now := metav1.Now()
	ec := stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Generation: 3}}
	ec.Status.ObservedGeneration = 3
	ec.Status.Conditions = []metav1.Condition{{Type: "Progressing", Status: metav1.ConditionTrue, Reason: "MemberPodFailed",
		Message: "deleting db-2's Failed Pod\nso it is recreated on its PVC"}}
	pods := []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "db-2", UID: "0123456789", DeletionTimestamp: &now}, Status: corev1.PodStatus{Phase: corev1.PodFailed}},
		{ObjectMeta: metav1.ObjectMeta{Name: "db-0"}, Spec: corev1.PodSpec{NodeName: "node-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}},
	}
	got := brief([]stewardv1.EtcdCluster{ec}, pods)
	for _, want := range []string{
		"cluster db (generation 3, observed 3): Progressing=True MemberPodFailed: deleting db-2's Failed Pod so it is recreated on its PVC",
		"pods: db-0 Running ready=true node=node-1",
		"db-2 Failed ready=false node= uid=01234567 deleting-since=",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("brief lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "\n") {
		t.Errorf("brief spans lines (CI keeps a failed test's first line of each message):\n%s", got)
	}
	long := brief([]stewardv1.EtcdCluster{ec}, make([]corev1.Pod, 200))
	if len(long) > briefLimit+len("…") {
		t.Errorf("brief of 200 Pods is %d bytes, over %d", len(long), briefLimit)
	}
}

func TestLinesAbout(t *testing.T) {
	log := "a ns-1 x\nb ns-2\nc ns-1 y\nd ns-1 z\n"
	if got := LinesAbout(log, "ns-1", 2); strings.Join(got, "|") != "c ns-1 y|d ns-1 z" {
		t.Errorf("LinesAbout = %q", got)
	}
}
