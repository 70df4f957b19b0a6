package controller_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/controller"
	"github.com/etcd-steward/steward/internal/plan"
)

// A member Pod starts etcd through the data check, which the Steward image carries. When that image
// cannot be resolved the create is refused (fail closed) instead of starting etcd unchecked; the
// plan's hold (Facts.ImageHold) says why in status. Without an image at all (r.Image nil) is the
// explicit test-only mode and still starts etcd directly.
func TestCreatePodRefusedWithoutTheStewardImage(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ec := unmanagedCluster(ns)
	ec.Spec.TLS = &stewardv1.TLSSpec{Enabled: ptr.To(false)}
	ec.Status.Observed = ec.Spec.MemberTemplate.DeepCopy()
	m := &stewardv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "ghost-0", Namespace: ns,
		Labels: map[string]string{stewardv1.LabelCluster: "ghost"}},
		Spec: stewardv1.EtcdMemberSpec{ClusterName: "ghost", Ordinal: 0, Template: ec.Spec.MemberTemplate}}
	if err := env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	unknown := errors.New("set --operator-image")
	r := &controller.EtcdClusterReconciler{Client: env.Client, APIReader: env.Client, EtcdImageRepository: "repo/etcd",
		Image: func(context.Context) (string, error) { return "", unknown }}
	if hold := r.ImageHold(context.Background()); !strings.Contains(hold, "set --operator-image") {
		t.Errorf("ImageHold = %q, want the lookup's error", hold)
	}
	err := r.GatherAndApply(ctx, ec, plan.Action{Kind: plan.CreatePod, Member: "ghost-0"})
	if !errors.Is(err, unknown) {
		t.Errorf("CreatePod without the Steward image: err = %v, want the image error", err)
	}
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ghost-0"}, pod); !apierrors.IsNotFound(err) {
		t.Fatalf("a Pod was created without the data check (command %v): %v", pod.Spec.Containers[0].Command, err)
	}

	r.Image = func(context.Context) (string, error) { return "steward:test", nil }
	if hold := r.ImageHold(ctx); hold != "" {
		t.Errorf("ImageHold = %q with the image known", hold)
	}
	if err := r.GatherAndApply(ctx, ec, plan.Action{Kind: plan.CreatePod, Member: "ghost-0"}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ghost-0"}, pod); err != nil {
		t.Fatal(err)
	}
	if cmd := strings.Join(pod.Spec.Containers[0].Command, " "); !strings.Contains(cmd, "steward-member run-etcd") {
		t.Errorf("etcd must start through the data check: command %q", cmd)
	}

	r.Image = nil // the test-only mode: no image, etcd directly
	if hold := r.ImageHold(ctx); hold != "" {
		t.Errorf("ImageHold = %q without an image lookup", hold)
	}
}
