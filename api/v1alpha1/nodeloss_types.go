package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeLossSpec says how long Steward waits before it replaces a member lost with its node. A
// replacement needs etcd's own evidence too: the leader has no connection to the member.
// +kubebuilder:validation:XValidation:rule="(has(self.cordonedReplaceAfterSeconds) ? self.cordonedReplaceAfterSeconds : 1800) >= (has(self.replaceAfterSeconds) ? self.replaceAfterSeconds : 180)",message="spec.nodeLoss.cordonedReplaceAfterSeconds must be at least spec.nodeLoss.replaceAfterSeconds: a cordon is an administrator's intent, weaker evidence than a node that stopped answering"
type NodeLossSpec struct {
	// replaceAfterSeconds a member's node must have been not Ready (or deleted), and etcd's leader
	// without a connection to the member, without a break, before the member is replaced on
	// another node. The same time applies to a member whose volume is pinned to a deleted node. A
	// node tainted node.kubernetes.io/out-of-service is gone by its administrator's word: its
	// member is replaced as soon as etcd's leader shows it lost.
	// +optional
	// +kubebuilder:default=180
	// +kubebuilder:validation:Minimum=30
	// +kubebuilder:validation:Maximum=86400
	ReplaceAfterSeconds *int32 `json:"replaceAfterSeconds,omitempty"`
	// cordonedReplaceAfterSeconds a node-local volume's node must have been cordoned
	// (spec.unschedulable), seen by Steward, while the member's Pod cannot run, before the member is
	// replaced on another node. Until then the cordon is an administrator's intent (a drain, an
	// upgrade) and Steward waits for the node to come back.
	// +optional
	// +kubebuilder:default=1800
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=604800
	CordonedReplaceAfterSeconds *int32 `json:"cordonedReplaceAfterSeconds,omitempty"`
}

// MemberNodeLoss is what Steward has seen of one member's node (or its volume's node) being lost.
type MemberNodeLoss struct {
	// member is the EtcdMember's name.
	Member string `json:"member"`
	// node is the node the record is about: the member's Pod's, or its node-local volume's.
	// +optional
	Node string `json:"node,omitempty"`
	// unheardSince is since when the running operator (observer) has seen etcd's leader without a
	// connection to the member, without a break; cleared by any sign the leader hears it, and
	// when the leader's view cannot be read.
	// +optional
	UnheardSince *metav1.Time `json:"unheardSince,omitempty"`
	// observer is the operator process that has watched since unheardSince: another one (a
	// restart, a new leader) starts the clock again.
	// +optional
	Observer string `json:"observer,omitempty"`
	// cordonedSince is when Steward first saw the node cordoned (a Node does not record it).
	// +optional
	CordonedSince *metav1.Time `json:"cordonedSince,omitempty"`
}
