package controller_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
)

// The default placement lives in the Pods Steward builds, never in the cluster's spec: a CRD default
// there would change the template of every existing cluster on upgrade and roll all its members.
// The API server accepts the default constraints as they are (node inclusion policies included).
func TestDefaultPlacementStaysOutOfTheSpec(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ec := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "spread", Namespace: ns},
		Spec: stewardv1.EtcdClusterSpec{Replicas: ptr.To[int32](3), MemberTemplate: stewardv1.MemberTemplate{Version: "3.6.16"}}}
	if err := env.Client.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
		t.Fatal(err)
	}
	if ec.Spec.Affinity != nil || len(ec.Spec.TopologySpreadConstraints) > 0 {
		t.Errorf("the API server defaulted placement into the spec: affinity %+v, constraints %+v",
			ec.Spec.Affinity, ec.Spec.TopologySpreadConstraints)
	}
	pod := &corev1.Pod{}
	eventually(t, "seed Pod created", func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "spread-0"}, pod)
	})
	cs := pod.Spec.TopologySpreadConstraints
	if len(cs) != 2 || cs[0].TopologyKey != corev1.LabelHostname || cs[1].TopologyKey != corev1.LabelTopologyZone ||
		cs[0].NodeTaintsPolicy == nil || *cs[0].NodeTaintsPolicy != corev1.NodeInclusionPolicyHonor {
		t.Errorf("seed Pod constraints = %+v, want the default hostname and zone spread", cs)
	}
	if tmpl := resources.PodTemplate(pod); tmpl == nil || tmpl.Affinity != nil || len(tmpl.TopologySpreadConstraints) > 0 {
		t.Errorf("the Pod records placement in its template %+v: a default change would then roll it", tmpl)
	}
}

// Status names the node each member's Pod was bound to and that node's zone label, read from the
// manager's Node metadata cache; PlacementAtRisk is set from the first reconcile on.
func TestStatusShowsNodeAndZone(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + ns, Labels: map[string]string{corev1.LabelTopologyZone: "zone-x"}}}
	if err := env.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
	ec := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "where", Namespace: ns},
		Spec: stewardv1.EtcdClusterSpec{Replicas: ptr.To[int32](3), MemberTemplate: stewardv1.MemberTemplate{Version: "3.6.16"}}}
	if err := env.Client.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	eventually(t, "seed Pod created", func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "where-0"}, pod)
	})
	// No scheduler runs here: the test binds the Pod as one would.
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: ns},
		Target: corev1.ObjectReference{Kind: "Node", Name: node.Name}}
	if err := env.Client.SubResource("binding").Create(ctx, pod, binding); err != nil {
		t.Fatal(err)
	}
	eventually(t, "status names the seed's node and zone", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
			return err
		}
		if len(ec.Status.Members) == 0 || ec.Status.Members[0].Node != node.Name || ec.Status.Members[0].Zone != "zone-x" {
			return fmt.Errorf("members %+v", ec.Status.Members)
		}
		if meta.FindStatusCondition(ec.Status.Conditions, "PlacementAtRisk") == nil {
			return fmt.Errorf("no PlacementAtRisk condition in %+v", ec.Status.Conditions)
		}
		return nil
	})
}
