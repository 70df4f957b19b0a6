package framework

import (
	"slices"
	"strings"
	"testing"
	"time"

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

// The cluster a wait is about comes first: one not settled before settled ones, then the newest.
func TestBriefUnsettledFirst(t *testing.T) {
	at := func(name string, minute int, conds ...metav1.Condition) stewardv1.EtcdCluster {
		ec := stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name,
			CreationTimestamp: metav1.NewTime(time.Date(2026, 12, 7, 8, minute, 0, 0, time.UTC))}}
		ec.Status.Conditions = conds
		return ec
	}
	ok := []metav1.Condition{{Type: "Available", Status: metav1.ConditionTrue}, {Type: "Progressing", Status: metav1.ConditionFalse}}
	busy := []metav1.Condition{{Type: "Available", Status: metav1.ConditionFalse}, {Type: "Progressing", Status: metav1.ConditionTrue}}
	clusters := []stewardv1.EtcdCluster{at("src", 0, ok...), at("to-rev", 5, ok...), at("to-time", 6, busy...), at("old-busy", 1, busy...)}
	got := brief(clusters, nil)
	var order []string
	for _, part := range strings.Split(got, " | ") {
		if name, ok := strings.CutPrefix(part, "cluster "); ok {
			order = append(order, strings.Fields(name)[0])
		}
	}
	if want := []string{"to-time", "old-busy", "to-rev", "src"}; !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	if clusters[0].Name != "src" {
		t.Errorf("brief reordered its caller's slice")
	}
}

func TestLinesAbout(t *testing.T) {
	log := "a ns-1 x\nb ns-2\nc ns-1 y\nd ns-1 z\n"
	if got := LinesAbout(log, "ns-1", 2); strings.Join(got, "|") != "c ns-1 y|d ns-1 z" {
		t.Errorf("LinesAbout = %q", got)
	}
}

// A failed wait's line carries the namespace's last warnings, oldest first, on one line.
func TestWarnings(t *testing.T) {
	ev := func(typ, reason string, sec int, msg string) corev1.Event {
		return corev1.Event{Type: typ, Reason: reason, Message: msg, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "to-time-0"},
			LastTimestamp: metav1.NewTime(time.Date(2026, 12, 7, 7, 12, sec, 0, time.UTC))}
	}
	events := []corev1.Event{
		ev(corev1.EventTypeWarning, "FailedMount", 30, "MountVolume.SetUp failed\nfor volume \"member-binary\""),
		ev(corev1.EventTypeNormal, "Pulled", 40, "image present"),
		ev(corev1.EventTypeWarning, "BackOff", 50, "Back-off restarting failed container restore-fetch"),
		ev(corev1.EventTypeWarning, "Old", 10, "the oldest"),
	}
	got := warnings(events, 2)
	want := "; last warnings: 07:12:30 Pod/to-time-0 FailedMount (x1): MountVolume.SetUp failed for volume \"member-binary\"; " +
		"07:12:50 Pod/to-time-0 BackOff (x1): Back-off restarting failed container restore-fetch"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if warnings(events[1:2], 3) != "" {
		t.Errorf("no warnings should say nothing")
	}
}
