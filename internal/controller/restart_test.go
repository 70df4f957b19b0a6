package controller_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/controller"
)

// An in-place restart records the etcd container it restarts in the same patch as the image
// change (the intent before the act): the plan holds the member unavailable until the kubelet
// reports another container, ready, for the Pod's generation of the change.
func TestRestartContainerRecordsTheContainerBefore(t *testing.T) {
	ctx := context.Background()
	ec, pod, setContainer := restartFixture(t)
	setContainer("containerd://before", "repo/etcd:v3.6.16")
	gen := pod.Generation
	r := &controller.EtcdClusterReconciler{Client: env.Client, APIReader: env.Client, EtcdImageRepository: "repo/etcd"}
	if err := r.RestartContainerJudged(ctx, ec, pod.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	var got corev1.Pod
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Containers[0].Image != "registry.local/etcd:v3.6.16-patched" ||
		got.Annotations[stewardv1.AnnotationRestartedFrom] != "containerd://before" {
		t.Errorf("image %s, restarted-from %q", got.Spec.Containers[0].Image, got.Annotations[stewardv1.AnnotationRestartedFrom])
	}
	if got.Generation <= gen {
		t.Errorf("generation %d after the change, %d before: the plan's rule needs it to move", got.Generation, gen)
	}
}

// A second in-place restart judged on a Pod already on the image (its container restarted, its
// template record behind, or the plan choosing it twice) changes no container, so the kubelet
// restarts nothing: it must not mark the running container as the one restarted, or the member
// stays unready for good. CI saw a roll stuck 8 minutes on "web-1 is not ready" with web-1's Pod
// Ready, after two RestartContainer events for web-1 11 s apart.
func TestRestartContainerOnTheImageAlreadyMarksNothing(t *testing.T) {
	ctx := context.Background()
	ec, pod, setContainer := restartFixture(t)
	setContainer("containerd://before", "repo/etcd:v3.6.16")
	r := &controller.EtcdClusterReconciler{Client: env.Client, APIReader: env.Client, EtcdImageRepository: "repo/etcd"}
	if err := r.RestartContainerJudged(ctx, ec, pod.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	setContainer("containerd://after", "registry.local/etcd:v3.6.16-patched") // the kubelet restarted it
	if err := r.RestartContainerJudged(ctx, ec, pod.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	var got corev1.Pod
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
		t.Fatal(err)
	}
	if from := got.Annotations[stewardv1.AnnotationRestartedFrom]; from != "containerd://before" {
		t.Errorf("restarted-from %q after a restart that changed no image: want the first restart's %q kept", from, "containerd://before")
	}
}

// restartFixture: a cluster whose target image is a patched 3.6.16 and a member Pod on the plain
// one; setContainer sets the etcd container the kubelet reports.
func restartFixture(t *testing.T) (*stewardv1.EtcdCluster, *corev1.Pod, func(id, image string)) {
	t.Helper()
	ctx := context.Background()
	ns := namespace(t)
	ec := unmanagedCluster(ns)
	ec.Spec.Image = "registry.local/etcd:v3.6.16-patched"
	ec.Status.Observed = ec.Spec.MemberTemplate.DeepCopy()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ghost-1", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "repo/etcd:v3.6.16"}}}}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return ec, pod, func(id, image string) {
		t.Helper()
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "etcd", ContainerID: id, Ready: true, Image: image}}
		if err := env.Client.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
}
