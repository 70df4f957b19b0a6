package controller_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/controller"
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/plan"
)

// The controller's own apply and effects against a real API server (issue 10): the intent is
// written before the etcd call, the Disrupter's second read stops what the first allowed, and a
// Pod deletion is preconditioned on the Pod that was judged. The cluster object exists only in the
// test, so the running manager never acts on these members.

func unmanagedCluster(ns string) *stewardv1.EtcdCluster {
	return &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "ghost", Namespace: ns, UID: types.UID("ghost-uid")},
		Spec: stewardv1.EtcdClusterSpec{MemberTemplate: stewardv1.MemberTemplate{Version: "3.6.16"}}}
}

func TestApplyWritesRemovalIntentFirst(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ec := unmanagedCluster(ns)
	m := &stewardv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "ghost-2", Namespace: ns,
		Labels: map[string]string{stewardv1.LabelCluster: "ghost"}},
		Spec: stewardv1.EtcdMemberSpec{ClusterName: "ghost", Ordinal: 2, Template: ec.Spec.MemberTemplate}}
	if err := env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	m.Status.Phase, m.Status.ID = stewardv1.MemberRunning, "2a"
	if err := env.Client.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	r := &controller.EtcdClusterReconciler{Client: env.Client, APIReader: env.Client}
	a := plan.Action{Kind: plan.RemoveMember, Member: "ghost-2", MemberID: 0x2a, Replacing: true,
		Disruption: &disruption.Request{Kind: disruption.Replace, Victim: "ghost-2"}}
	err := r.GatherAndApply(ctx, ec, a)
	var refusal *disruption.Refusal
	if !errors.As(err, &refusal) {
		t.Fatalf("with etcd unreachable the removal must be refused, got %v", err)
	}
	var got stewardv1.EtcdMember
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != stewardv1.MemberRemoving || !got.Status.Replacing || got.Status.PhaseSince == nil {
		t.Errorf("the intent (phase Removing, replacing) must be written before the etcd call: %+v", got.Status)
	}
}

func TestDeletePodIsPreconditionedOnTheJudgedPod(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ec := unmanagedCluster(ns)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ghost-1", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "repo/etcd:v3.6.16"}}}}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	r := &controller.EtcdClusterReconciler{Client: env.Client, APIReader: env.Client}
	stale := pod.DeepCopy()
	stale.UID = "a-pod-since-replaced"
	if err := r.DeletePodJudged(ctx, ec, stale); err == nil {
		t.Errorf("deleting with a stale UID must fail its precondition")
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); err != nil {
		t.Fatalf("the current Pod was deleted for a stale judgement: %v", err)
	}
	if err := r.DeletePodJudged(ctx, ec, pod); err != nil {
		t.Fatalf("deleting the judged Pod: %v", err)
	}
}
