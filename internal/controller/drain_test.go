package controller_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/controller"
	"github.com/etcd-steward/steward/internal/resources"
)

// A drain relabels the Pod out of the client Service, then waits until the Service's endpoints
// stop listing it (there is no EndpointSlice controller here: the test plays it) and a grace for
// the proxies; it gives up waiting after its timeout instead of blocking the step.
func TestDrainWaitsForTheEndpointsToDropThePod(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ec := unmanagedCluster(ns)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ghost-1", Namespace: ns,
		Labels: map[string]string{stewardv1.LabelCluster: "ghost", stewardv1.LabelVoter: "true"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "repo/etcd:v3.6.16"}}}}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.PodIP = "10.88.0.7"
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "ghost-client-x", Namespace: ns,
		Labels: map[string]string{discoveryv1.LabelServiceName: resources.ClientServiceName("ghost")}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.88.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"10.88.0.8"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}}
	if err := env.Client.Create(ctx, slice); err != nil {
		t.Fatal(err)
	}
	r := &controller.EtcdClusterReconciler{Client: env.Client, APIReader: env.Client}

	// The endpoints never change: the drain waits its timeout out, then goes on.
	start := time.Now()
	if err := r.DrainJudged(ctx, ec, pod.DeepCopy(), 600*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 600*time.Millisecond {
		t.Errorf("returned after %v while the endpoints still listed the Pod", took)
	}
	var got corev1.Pod
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
		t.Fatal(err)
	}
	if got.Labels[stewardv1.LabelVoter] != resources.VoterDraining {
		t.Fatalf("voter label %q, want %q", got.Labels[stewardv1.LabelVoter], resources.VoterDraining)
	}

	// The endpoints drop the Pod a moment later: the drain returns then, plus its grace.
	go func() {
		time.Sleep(300 * time.Millisecond)
		slice.Endpoints = slice.Endpoints[1:]
		_ = env.Client.Update(ctx, slice)
	}()
	got.Status.PodIP = "10.88.0.7"
	start = time.Now()
	if err := r.DrainJudged(ctx, ec, got.DeepCopy(), 10*time.Second, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 500*time.Millisecond || took > 5*time.Second {
		t.Errorf("drain took %v: want the endpoint update (~0.3 s) plus the grace (0.2 s)", took)
	}

	// A defragmentation keeps the member running: it is undrained at once afterwards.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
		t.Fatal(err)
	}
	if err := r.Undrain(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
		t.Fatal(err)
	}
	if got.Labels[stewardv1.LabelVoter] != "true" || got.Annotations[stewardv1.AnnotationDrainingSince] != "" {
		t.Errorf("after undrain: label %q, annotation %q", got.Labels[stewardv1.LabelVoter], got.Annotations[stewardv1.AnnotationDrainingSince])
	}
}
