package controller_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
