package controller

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/datacheck"
	"github.com/etcd-steward/steward/internal/plan"
)

// The data check's two kinds of verdict are told apart from the etcd container's termination: a
// refused version keeps the member's data, a lost directory has it replaced.
func TestPodFactsTellsVersionRefusalFromDataLoss(t *testing.T) {
	pod := func(code int32, msg string, last bool) *corev1.Pod {
		term := &corev1.ContainerStateTerminated{ExitCode: code, Message: msg, Reason: "Error"}
		cs := corev1.ContainerStatus{Name: "etcd"}
		if last {
			cs.LastTerminationState.Terminated = term
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
		} else {
			cs.State.Terminated = term
		}
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{cs}}}
	}
	refused := datacheck.MessagePrefix + "VersionRefused: etcd 3.7.3 refuses data of storage version 3.5 or older"
	lost := datacheck.MessagePrefix + "Empty: the member's data is lost"
	for _, last := range []bool{true, false} {
		if p := podFacts(pod(datacheck.ExitVersionRefused, refused, last)); p.DataLost != "" || p.VersionRefused == "" {
			t.Errorf("version refused (last=%v): DataLost %q, VersionRefused %q", last, p.DataLost, p.VersionRefused)
		}
		if p := podFacts(pod(datacheck.ExitDataLost, lost, last)); p.DataLost == "" || p.VersionRefused != "" {
			t.Errorf("data lost (last=%v): DataLost %q, VersionRefused %q", last, p.DataLost, p.VersionRefused)
		}
		if p := podFacts(pod(1, refused, last)); p.DataLost != "" || p.VersionRefused != "" {
			t.Errorf("etcd's own exit 1 (last=%v) read as a verdict", last)
		}
	}
}

func TestImageTag(t *testing.T) {
	for ref, want := range map[string]string{
		"gcr.io/etcd-development/etcd:v3.6.16":                                                "v3.6.16",
		"registry.local:5000/etcd":                                                            "",
		"registry.local:5000/etcd:3.6.16":                                                     "3.6.16",
		"etcd@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa":        "",
		"etcd:custom@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa": "custom",
		"etcd":             "",
		"Not A Reference:": "",
	} {
		if got := imageTag(ref); got != want {
			t.Errorf("imageTag(%q) = %q, want %q", ref, got, want)
		}
	}
}

func TestVersionCondition(t *testing.T) {
	cases := []struct {
		image, warning string
		want           metav1.ConditionStatus
	}{
		{"", "", metav1.ConditionFalse},
		{"mirror.local/etcd:v3.6.16", "", metav1.ConditionFalse},
		{"mirror.local/etcd:3.6.16", "", metav1.ConditionFalse},
		{"mirror.local/etcd:latest", "", metav1.ConditionTrue},
		{"mirror.local/etcd@sha256:abc", "", metav1.ConditionTrue},
		{"", "version is not X.Y.Z", metav1.ConditionTrue},
	}
	for _, c := range cases {
		ec := &stewardv1.EtcdCluster{Spec: stewardv1.EtcdClusterSpec{MemberTemplate: stewardv1.MemberTemplate{Version: "3.6.16", Image: c.image}}}
		if got := versionCondition(ec, c.warning); got.Status != c.want {
			t.Errorf("image %q warning %q: %s %s, want %s", c.image, c.warning, got.Status, got.Message, c.want)
		}
	}
}

// A defragmentation recorded on its EtcdMember in this reconcile shows in the cluster status this
// reconcile writes: the plan's member statuses come from the facts read before it ran, and the
// cluster's status lagged a reconcile behind the member's (`kubectl etcd defrag` returned, and the
// cluster still showed the previous result).
func TestSetStatusShowsDefragmentationRecordedThisReconcile(t *testing.T) {
	old := &stewardv1.DefragmentationResult{Time: metav1.Unix(100, 0), Outcome: stewardv1.DefragmentationSucceeded}
	recorded := &stewardv1.DefragmentationResult{Time: metav1.Unix(200, 0), Outcome: stewardv1.DefragmentationSucceeded}
	ec := &stewardv1.EtcdCluster{}
	o := &observed{members: map[string]*stewardv1.EtcdMember{
		"db-0": {Status: stewardv1.EtcdMemberStatus{Defragmentation: &stewardv1.MemberDefragmentation{Last: old}}},
		"db-1": {Status: stewardv1.EtcdMemberStatus{Defragmentation: &stewardv1.MemberDefragmentation{Last: recorded}}},
	}}
	d := plan.Decision{Members: []stewardv1.MemberStatus{
		{Name: "db-0", Defragmentation: &stewardv1.MemberDefragmentation{Last: old}},
		{Name: "db-1", Defragmentation: &stewardv1.MemberDefragmentation{Last: old}},
		{Name: "db-2"},
	}}
	(&EtcdClusterReconciler{}).setStatus(ec, o, d)
	for i, want := range []*stewardv1.DefragmentationResult{old, recorded, nil} {
		var got *stewardv1.DefragmentationResult
		if dm := ec.Status.Members[i].Defragmentation; dm != nil {
			got = dm.Last
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: last defragmentation %+v, want %+v", ec.Status.Members[i].Name, got, want)
		}
	}
	if d.Members[1].Defragmentation.Last != old {
		t.Errorf("the decision's member statuses were changed in place")
	}
}
