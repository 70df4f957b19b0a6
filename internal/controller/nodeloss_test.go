package controller_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/controller"
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/plan"
	"github.com/etcd-steward/steward/internal/resources"
)

func createNode(t *testing.T, name string, ready corev1.ConditionStatus, since time.Time, change func(*corev1.Node)) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if change != nil {
		change(n)
	}
	if err := env.Client.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(since),
		LastHeartbeatTime: metav1.NewTime(since)}}
	if err := env.Client.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
}

func createPV(t *testing.T, name, node string) {
	t.Helper()
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/" + name}},
	}}
	if node != "" {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn,
				Values: []string{node}}}}}}}
	} else {
		pv.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/net/" + name}}
	}
	if err := env.Client.Create(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })
}

// The node facts of a reconcile, read from a real API server: a Pod's Node Ready or not (and since
// when), deleted, out of service; for a Pod that does not run, the one node its local volume is
// pinned to, cordoned or deleted; a volume without node affinity follows the Pod.
func TestNodeFactsFromTheAPIServer(t *testing.T) {
	ns := namespace(t)
	since := time.Now().Add(-time.Hour).Truncate(time.Second)
	up, down, cordoned, oos, gone := ns+"-up", ns+"-down", ns+"-cordoned", ns+"-oos", ns+"-gone"
	createNode(t, up, corev1.ConditionTrue, since, nil)
	createNode(t, down, corev1.ConditionUnknown, since, nil)
	createNode(t, cordoned, corev1.ConditionTrue, since, func(n *corev1.Node) { n.Spec.Unschedulable = true })
	createNode(t, oos, corev1.ConditionFalse, since, func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: controller.TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}}
	})
	createPV(t, ns+"-pv-gone", gone)
	createPV(t, ns+"-pv-cordoned", cordoned)
	createPV(t, ns+"-pv-net", "")
	running := func(node string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	pending := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}
	claim := func(pv string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv}}
	}
	members := []plan.Member{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}, {Name: "e"}, {Name: "f"}}
	pods := map[string]*corev1.Pod{"a": running(up), "b": running(down), "c": pending, "d": pending, "e": pending, "f": running(oos)}
	pvcs := map[string]*corev1.PersistentVolumeClaim{resources.PVCName("a"): claim(ns + "-pv-cordoned"),
		resources.PVCName("c"): claim(ns + "-pv-gone"), resources.PVCName("d"): claim(ns + "-pv-net"),
		resources.PVCName("e"): claim(ns + "-pv-cordoned")}
	r := &controller.EtcdClusterReconciler{Client: env.Client, APIReader: env.Client}
	got := r.NodeFactsFor(context.Background(), members, pods, pvcs)
	a, b, c, d, e, f := got[0], got[1], got[2], got[3], got[4], got[5]
	if n := a.Nodes.Pod; !n.Known || !n.Ready || n.Name != up || a.Nodes.Volume != nil || !a.Pod.NodeReady {
		t.Errorf("a runs on a Ready node (its volume's node does not matter while it runs): %+v", a.Nodes)
	}
	if n := b.Nodes.Pod; !n.Known || n.Ready || !n.NotReadySince.Equal(since) || b.Pod.NodeReady {
		t.Errorf("b's node is not Ready since %v: %+v", since, n)
	}
	if v := c.Nodes.Volume; v == nil || v.Name != gone || !v.Known || !v.Deleted {
		t.Errorf("c's volume is pinned to a deleted node: %+v", v)
	}
	if d.Nodes.Volume != nil || d.Nodes.Pod.Name != "" {
		t.Errorf("d's volume follows the Pod: %+v", d.Nodes)
	}
	if v := e.Nodes.Volume; v == nil || v.Name != cordoned || !v.Cordoned || !v.Ready {
		t.Errorf("e's volume is pinned to a cordoned node: %+v", v)
	}
	if n := f.Nodes.Pod; !n.OutOfService || !f.Pod.NodeGone {
		t.Errorf("f's node is out of service: %+v", n)
	}
}

// A node loss replacement writes status.replacedElsewhere with the removal intent, before the
// chokepoint is asked (here it refuses: etcd is unreachable, so nothing proves the loss).
func TestRemovalIntentRecordsReplacedElsewhere(t *testing.T) {
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
	a := plan.Action{Kind: plan.RemoveMember, Member: "ghost-2", MemberID: 0x2a, Replacing: true, ReplacedElsewhere: "NodeLost: gone",
		Disruption: &disruption.Request{Kind: disruption.ReplaceLost, Victim: "ghost-2"}}
	var refusal *disruption.Refusal
	if err := r.GatherAndApply(ctx, ec, a); !errors.As(err, &refusal) {
		t.Fatalf("with etcd unreachable the removal must be refused, got %v", err)
	}
	var got stewardv1.EtcdMember
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != stewardv1.MemberRemoving || !got.Status.Replacing || got.Status.ReplacedElsewhere != "NodeLost: gone" {
		t.Errorf("intent: %+v", got.Status)
	}
}

// DetachMember drops a member replaced elsewhere: its PVC is kept, detached (its ordinal reserved
// from then on), the EtcdMember goes, and its Pod, Terminating on a lost node, is left alone: never
// force-deleted.
func TestDetachMemberKeepsThePVCAndLeavesThePod(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ec := unmanagedCluster(ns)
	m := &stewardv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "ghost-1", Namespace: ns, Finalizers: []string{stewardv1.FinalizerMember},
		Labels: map[string]string{stewardv1.LabelCluster: "ghost"}},
		Spec: stewardv1.EtcdMemberSpec{ClusterName: "ghost", Ordinal: 1, Template: ec.Spec.MemberTemplate}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ghost-1", Namespace: ns, Finalizers: []string{"test/kubelet-gone"},
		Labels: map[string]string{stewardv1.LabelCluster: "ghost"}},
		Spec: corev1.PodSpec{NodeName: ns + "-dead", Containers: []corev1.Container{{Name: "etcd", Image: "etcd"}}}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("ghost-1"), Namespace: ns,
		Labels: map[string]string{stewardv1.LabelCluster: "ghost"}, Annotations: map[string]string{stewardv1.AnnotationClusterUID: "ghost-uid"}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	for _, o := range []client.Object{m, pod, pvc} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		p := &corev1.Pod{}
		if env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), p) == nil {
			p.Finalizers = nil
			_ = env.Client.Update(context.Background(), p)
		}
	})
	m.Status.Phase, m.Status.Replacing, m.Status.ReplacedElsewhere = stewardv1.MemberRemoving, true, "NodeLost: gone"
	if err := env.Client.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	// The Pod was deleted earlier (the plan's DeletePod); on a dead node it stays Terminating.
	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	r := &controller.EtcdClusterReconciler{Client: env.Client, APIReader: env.Client}
	a := plan.Action{Kind: plan.DetachMember, Member: "ghost-1", Reason: plan.ReasonReplacingElsewhere, Message: "dropping ghost-1"}
	if err := r.GatherAndApply(ctx, ec, a); err != nil {
		t.Fatal(err)
	}
	var gotM stewardv1.EtcdMember
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), &gotM); !apierrors.IsNotFound(err) {
		t.Errorf("the EtcdMember must be gone: %v (%+v)", err, gotM.ObjectMeta)
	}
	var gotPVC corev1.PersistentVolumeClaim
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pvc), &gotPVC); err != nil {
		t.Fatalf("the PVC must be kept: %v", err)
	}
	if _, ours := gotPVC.Labels[stewardv1.LabelCluster]; ours || gotPVC.Labels[stewardv1.LabelDiscardedFrom] != "ghost" ||
		gotPVC.Labels[stewardv1.LabelDiscardedOrdinal] != "1" || gotPVC.Annotations[stewardv1.AnnotationClusterUID] != "" {
		t.Errorf("the PVC is not detached: labels %v, annotations %v", gotPVC.Labels, gotPVC.Annotations)
	}
	var gotPod corev1.Pod
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), &gotPod); err != nil || gotPod.DeletionTimestamp == nil {
		t.Errorf("the Pod stays Terminating, never force-deleted: %v, %+v", err, gotPod.DeletionTimestamp)
	}
}
