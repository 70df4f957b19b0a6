package controller

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/plan"
	"github.com/etcd-steward/steward/internal/resources"
)

// TestPlacementDefaultsRollNothing fails when a change of the default placement would roll running
// members. The planner judges a member's Pod only by the facts the controller reads from it (the
// template annotation, the Pod revision, whether an image change alone reaches the target), so a
// Pod scheduled with any other placement than this Steward's default must yield exactly the facts a
// Pod this Steward builds now yields: then no plan can tell them apart, and an operator upgrade
// rolls nobody. A Pod built by an older Steward with its preferred anti-affinity is the case in
// hand; the others stand for defaults still to come.
func TestPlacementDefaultsRollNothing(t *testing.T) {
	ec := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "u"},
		Spec: stewardv1.EtcdClusterSpec{MemberTemplate: stewardv1.MemberTemplate{Version: "3.6.16"}}}
	ec.Status.Observed = ec.Spec.MemberTemplate.DeepCopy()
	r := &EtcdClusterReconciler{EtcdImageRepository: "repo/etcd"}
	m := &stewardv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "db-1"}}
	build := func() *corev1.Pod {
		return resources.Pod(resources.Member{Cluster: ec, Name: "db-1", Template: ec.Status.Observed, Voter: true,
			ToolsImage: "steward:test"}, r.EtcdImageRepository)
	}
	fresh := r.podFacts(ec, m, build())
	if fresh.Revision != resources.PodRevision || fresh.Template == nil ||
		plan.Compare(*fresh.Template, *ec.Status.Observed, "") != 0 || fresh.ImageOnly {
		t.Fatalf("a Pod built now reads as behind its own target: %+v", fresh)
	}
	sel := &metav1.LabelSelector{MatchLabels: resources.SelectorLabels("db")}
	placements := map[string]func(p *corev1.Pod){
		"the preferred anti-affinity of older Stewards": func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = nil
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100,
					PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: sel, TopologyKey: corev1.LabelHostname}}}}}
		},
		"no placement at all": func(p *corev1.Pod) { p.Spec.Affinity, p.Spec.TopologySpreadConstraints = nil, nil },
		"another spread": func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 2, TopologyKey: "rack",
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}}
		},
	}
	// The same holds while a patch release rolls: both restart their container in place.
	patched := ec.DeepCopy()
	patched.Status.Observed.Version = "3.6.17"
	if !r.podFacts(patched, m, build()).ImageOnly {
		t.Fatal("a patch release no longer reads as image-only: the test below checks nothing")
	}
	for name, edit := range placements {
		t.Run(name, func(t *testing.T) {
			old := build()
			edit(old)
			for _, target := range []*stewardv1.EtcdCluster{ec, patched} {
				if got, want := r.podFacts(target, m, old), r.podFacts(target, m, build()); !reflect.DeepEqual(got, want) {
					t.Errorf("target %s: a Pod placed by another default reads differently from one built now, so "+
						"the planner could roll it:\n got %+v\nwant %+v", target.Status.Observed.Version, got, want)
				}
			}
		})
	}
}
