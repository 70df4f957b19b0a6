package resources

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// Placement is part of neither the member template a Pod records nor PodRevision: the scheduler
// reads it once, when it places the Pod, and a running Pod's placement cannot change. A change of
// the defaults below therefore rolls no member: each Pod keeps the placement it was scheduled
// with, and Pods built from now on (a scale-up, a replacement, a repair, a roll the user starts)
// get the new one. TestPlacementDefaultsRollNothing guards this.

// topologySpread is the template's constraints or, when it has none, the default: members of one
// cluster on different nodes wherever nodes allow it, and across zones when nodes carry zone labels.
//
//   - Hostname, DoNotSchedule, maxSkew 1: with at least as many nodes as members, no two share a
//     node. Only nodes the Pod may use count as domains (nodeAffinityPolicy and nodeTaintsPolicy
//     Honor), so a cordoned node (tainted node.kubernetes.io/unschedulable) or an unreachable one
//     (node.kubernetes.io/unreachable:NoSchedule) is no domain with zero members that would hold
//     the replacement of a lost member hostage. One node is one domain: a single-node Kubernetes
//     still runs three members.
//   - Zone, ScheduleAnyway, maxSkew 1: a preference, so a zone that is lost, full or missing (nodes
//     without the label) never keeps a replacement from a surviving zone.
func topologySpread(cluster string, t *stewardv1.MemberTemplate) []corev1.TopologySpreadConstraint {
	if len(t.TopologySpreadConstraints) > 0 {
		out := make([]corev1.TopologySpreadConstraint, len(t.TopologySpreadConstraints))
		for i := range t.TopologySpreadConstraints {
			t.TopologySpreadConstraints[i].DeepCopyInto(&out[i])
		}
		return out
	}
	honor := corev1.NodeInclusionPolicyHonor
	spread := func(key string, when corev1.UnsatisfiableConstraintAction) corev1.TopologySpreadConstraint {
		return corev1.TopologySpreadConstraint{
			MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: when,
			LabelSelector:      &metav1.LabelSelector{MatchLabels: SelectorLabels(cluster)},
			NodeAffinityPolicy: &honor, NodeTaintsPolicy: &honor,
		}
	}
	return []corev1.TopologySpreadConstraint{
		spread(corev1.LabelHostname, corev1.DoNotSchedule),
		spread(corev1.LabelTopologyZone, corev1.ScheduleAnyway),
	}
}

// affinity is the template's, as given, or none. The preferred hostname anti-affinity older
// Stewards set by default is gone: the hostname spread above is the same rule made firm, and
// inter-pod affinity is the scheduler's most expensive check in large clusters. A user who sets
// their own topologySpreadConstraints has chosen the placement, and gets no extra preference.
func affinity(t *stewardv1.MemberTemplate) *corev1.Affinity {
	return t.Affinity.DeepCopy()
}
