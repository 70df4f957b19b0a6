package resources

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// With no placement of the user's, members spread over nodes (firmly) and zones (preferably), both
// counting only the nodes a member may use.
func TestDefaultPlacement(t *testing.T) {
	pod := Pod(member(cluster(nil)), "repo/etcd")
	if pod.Spec.Affinity != nil {
		t.Errorf("affinity = %+v, want none by default (the hostname spread replaces the old preferred anti-affinity)", pod.Spec.Affinity)
	}
	got := pod.Spec.TopologySpreadConstraints
	if len(got) != 2 {
		t.Fatalf("%d topology spread constraints, want hostname and zone", len(got))
	}
	want := []struct {
		key  string
		when corev1.UnsatisfiableConstraintAction
	}{{corev1.LabelHostname, corev1.DoNotSchedule}, {corev1.LabelTopologyZone, corev1.ScheduleAnyway}}
	for i, c := range got {
		if c.TopologyKey != want[i].key || c.WhenUnsatisfiable != want[i].when || c.MaxSkew != 1 {
			t.Errorf("constraint %d = %s %s maxSkew %d, want %s %s maxSkew 1", i, c.TopologyKey, c.WhenUnsatisfiable, c.MaxSkew,
				want[i].key, want[i].when)
		}
		if c.NodeTaintsPolicy == nil || *c.NodeTaintsPolicy != corev1.NodeInclusionPolicyHonor ||
			c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy != corev1.NodeInclusionPolicyHonor {
			t.Errorf("%s: node policies must be Honor: a cordoned or unreachable node is no domain", c.TopologyKey)
		}
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) || !equality.Semantic.DeepEqual(c.LabelSelector.MatchLabels, SelectorLabels("db")) {
			t.Errorf("%s: selector %v must be the cluster's selector labels, matching its own Pods", c.TopologyKey, c.LabelSelector)
		}
	}
	if got[0].LabelSelector == got[1].LabelSelector {
		t.Error("the constraints share one selector: editing one Pod's would edit the other's")
	}
}

// The user's topologySpreadConstraints replace both defaults; the user's affinity is kept as given
// and leaves the default spread in place.
func TestUserPlacement(t *testing.T) {
	own := []corev1.TopologySpreadConstraint{{MaxSkew: 2, TopologyKey: "rack", WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}}}
	ec := cluster(func(c *stewardv1.EtcdCluster) { c.Spec.TopologySpreadConstraints = own })
	pod := Pod(member(ec), "repo/etcd")
	if !equality.Semantic.DeepEqual(pod.Spec.TopologySpreadConstraints, own) {
		t.Errorf("constraints = %+v, want exactly the user's", pod.Spec.TopologySpreadConstraints)
	}
	pod.Spec.TopologySpreadConstraints[0].LabelSelector.MatchLabels["app"] = "y"
	if own[0].LabelSelector.MatchLabels["app"] != "x" {
		t.Error("the Pod shares its constraints with the spec")
	}
	aff := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
		Weight: 1, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpExists}}}}}}}
	pod = Pod(member(cluster(func(c *stewardv1.EtcdCluster) { c.Spec.Affinity = aff })), "repo/etcd")
	if !equality.Semantic.DeepEqual(pod.Spec.Affinity, aff) || len(pod.Spec.TopologySpreadConstraints) != 2 {
		t.Errorf("affinity = %+v with %d constraints: want the user's affinity as given and the default spread",
			pod.Spec.Affinity, len(pod.Spec.TopologySpreadConstraints))
	}
}

// node of the scheduling model below: its hostname and zone labels, and whether a NoSchedule taint
// the members do not tolerate keeps them off (cordoned: node.kubernetes.io/unschedulable;
// lost: node.kubernetes.io/unreachable).
type node struct {
	name, zone string
	tainted    bool
}

// fits says which nodes the scheduler's PodTopologySpread filter (with TaintToleration) admits the
// next member on, given how many members each node holds. It follows the filter's rule for
// DoNotSchedule constraints: domains are the values of the key on the nodes the policies let
// count; a node fits when its domain's count plus one exceeds the smallest domain's by at most
// maxSkew. ScheduleAnyway constraints only score, so they never filter.
func fits(cs []corev1.TopologySpreadConstraint, nodes []node, members map[string]int) []string {
	var out []string
	for _, n := range nodes {
		ok := !n.tainted
		for _, c := range cs {
			if c.WhenUnsatisfiable != corev1.DoNotSchedule {
				continue
			}
			honor := c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor
			counts := map[string]int{}
			for _, d := range nodes {
				if !d.tainted || !honor {
					counts[d.name] += members[d.name]
				}
			}
			least := slices.Min(slices.Collect(func(yield func(int) bool) {
				for _, v := range counts {
					yield(v)
				}
			}))
			ok = ok && counts[n.name]+1-least <= int(c.MaxSkew)
		}
		if ok {
			out = append(out, n.name)
		}
	}
	return out
}

func TestDefaultSpreadSchedules(t *testing.T) {
	cs := Pod(member(cluster(nil)), "").Spec.TopologySpreadConstraints
	place := func(nodes []node, members map[string]int, n int) map[string]int {
		for range n {
			f := fits(cs, nodes, members)
			if len(f) == 0 {
				return members
			}
			members[f[0]]++
		}
		return members
	}
	one := []node{{name: "a"}}
	if got := place(one, map[string]int{}, 3); got["a"] != 3 {
		t.Errorf("one node holds %d of 3 members: a single-node Kubernetes must run them all", got["a"])
	}
	three := []node{{"a", "zone-a", false}, {"b", "zone-b", false}, {"c", "", false}}
	if got := place(three, map[string]int{}, 3); got["a"] != 1 || got["b"] != 1 || got["c"] != 1 {
		t.Errorf("three nodes hold %v: want one member each (a node without a zone label too)", got)
	}
	// c is cordoned or unreachable and its member is gone: a and b hold one each. c is no domain,
	// so the replacement fits beside one of them; counted as an empty domain it would fit nowhere.
	three[2].tainted = true
	if got := fits(cs, three, map[string]int{"a": 1, "b": 1}); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("the replacement fits on %v, want a or b", got)
	}
	ignore := corev1.NodeInclusionPolicyIgnore
	for i := range cs {
		cs[i].NodeTaintsPolicy = &ignore
	}
	if got := fits(cs, three, map[string]int{"a": 1, "b": 1}); len(got) != 0 {
		t.Errorf("the model lets the replacement on %v with nodeTaintsPolicy Ignore: it cannot tell Honor's worth", got)
	}
}
