package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/controller"
	"github.com/etcd-steward/steward/internal/resources"
)

// evictionBound is the manager's --eviction-bound in these tests.
const evictionBound = 4 * time.Second

// memberPod creates a Pod labelled as member name of cluster ghost, ready or not.
func memberPod(t *testing.T, ns, name string, ready bool) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
		stewardv1.LabelCluster: "ghost", stewardv1.LabelMember: name, stewardv1.LabelVoter: "true"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "repo/etcd:v3.6.16"}}}}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	if err := env.Client.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func evict(p *corev1.Pod) error {
	return env.Client.SubResource("eviction").Create(context.Background(), p,
		&policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
}

// refusedWith: the eviction was refused with 429 (kubectl drain retries it) saying want.
func refusedWith(err error, want string) error {
	if err == nil {
		return fmt.Errorf("eviction allowed, want 429 saying %q", want)
	}
	if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), want) {
		return fmt.Errorf("eviction refused with %w, want 429 saying %q", err, want)
	}
	return nil
}

// TestEvictionWebhook runs the webhook the manager serves behind a real kube-apiserver: an
// eviction of a member Pod is refused with 429 (recorded on the Pod) while another member is down,
// then while the member is not prepared, and allowed once the reconciler's effects prepared it.
// An eviction never prepared goes through after the bound, and other Pods are never held.
func TestEvictionWebhook(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ec := unmanagedCluster(ns)
	other := memberPod(t, ns, "ghost-0", false)
	pod := memberPod(t, ns, "ghost-1", true)

	eventually(t, "refused while ghost-0 is down", func() error {
		return refusedWith(evict(pod), "waiting until ghost-0 is healthy again")
	})
	var got corev1.Pod
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
		t.Fatal(err)
	}
	if got.Annotations[stewardv1.AnnotationEvictionRequested] == "" {
		t.Fatalf("the request is not recorded on the Pod: %v", got.Annotations)
	}
	other.Status.Conditions[0].Status = corev1.ConditionTrue
	if err := env.Client.Status().Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	eventually(t, "refused until prepared", func() error {
		return refusedWith(evict(pod), "moving leadership off it and taking it out of the client Service")
	})

	r := &controller.EtcdClusterReconciler{Client: env.Client, APIReader: env.Client}
	if err := r.PrepareEvictionJudged(ctx, ec, got.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
		t.Fatal(err)
	}
	if got.Labels[stewardv1.LabelVoter] != resources.VoterDraining || got.Annotations[stewardv1.AnnotationEvictionPrepared] == "" {
		t.Fatalf("not prepared: labels %v, annotations %v", got.Labels, got.Annotations)
	}
	eventually(t, "allowed once prepared", func() error { return evict(pod) })
	eventually(t, "the Pod evicted", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), &got); !apierrors.IsNotFound(err) && got.DeletionTimestamp == nil {
			return fmt.Errorf("still there (%w)", err)
		}
		return nil
	})

	// Never prepared: refused until the bound, then left to the PodDisruptionBudget (none here).
	start := time.Now()
	eventually(t, "refused", func() error { return refusedWith(evict(other), "the PodDisruptionBudget decides") })
	eventually(t, "allowed after the bound", func() error { return evict(other) })
	if took := time.Since(start); took < evictionBound-time.Second {
		t.Errorf("allowed after %v, before the bound %v", took, evictionBound)
	}

	// Not a member's Pod: never held.
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if err := env.Client.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if err := evict(plain); err != nil {
		t.Fatalf("eviction of a Pod that is no member's: %v", err)
	}
}
