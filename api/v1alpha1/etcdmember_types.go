package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdMemberSpec is what one member runs. Steward writes it; users should not.
type EtcdMemberSpec struct {
	// clusterName is the EtcdCluster this member belongs to (same namespace).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.clusterName is immutable"
	ClusterName string `json:"clusterName"`

	// ordinal is the member's number; the member, its Pod and its PVC are named <cluster>-<ordinal>.
	// Ordinals are never renumbered.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.ordinal is immutable"
	Ordinal int32 `json:"ordinal"`

	// template is the member template this member's Pod is built from. It differs from the
	// cluster's status.observed while the member is outdated.
	Template MemberTemplate `json:"template"`
}

// MemberPhase is where a member is in its life.
// +kubebuilder:validation:Enum=Pending;Joining;Learner;Running;Removing
type MemberPhase string

const (
	// MemberPending: the object exists; the member is not yet added to etcd.
	MemberPending MemberPhase = "Pending"
	// MemberJoining: intent to add is recorded; MemberAdd may or may not have happened (decide from
	// the live member list).
	MemberJoining MemberPhase = "Joining"
	// MemberLearner: added as a learner, catching up, not yet promoted.
	MemberLearner MemberPhase = "Learner"
	// MemberRunning: a voting member.
	MemberRunning MemberPhase = "Running"
	// MemberRemoving: intent to remove is recorded; MemberRemove may or may not have happened.
	MemberRemoving MemberPhase = "Removing"
)

// EtcdMemberStatus is what Steward last saw of this member.
type EtcdMemberStatus struct {
	// phase is where the member is in its life; written before each etcd or Kubernetes action
	// (intent first), so a restarted operator resumes from live facts and this record.
	// +optional
	Phase MemberPhase `json:"phase,omitempty"`
	// phaseSince is when phase last changed: it bounds how long a learner may catch up and drives
	// the cluster's progress deadline.
	// +optional
	PhaseSince *metav1.Time `json:"phaseSince,omitempty"`
	// id is etcd's member ID (hex), once added.
	// +optional
	ID string `json:"id,omitempty"`
	// replacing is true from the moment the member is removed from etcd to be replaced (its data
	// lost, crash-looping, or a memory member rolled) until it is a voter again. Until then the
	// cluster is one voter short, and no other member is disrupted.
	// +optional
	Replacing bool `json:"replacing,omitempty"`
	// replacedElsewhere says why the member is replaced on another node under a new name (its node
	// or its volume's node is lost); written before it is removed from etcd. Once out of etcd its
	// PVC is detached and kept, its Pod deleted (it may stay Terminating on a dead node: the removed
	// member ID fences it) and this EtcdMember dropped, after its successor was created.
	// +optional
	ReplacedElsewhere string `json:"replacedElsewhere,omitempty"`
	// role in Raft.
	// +optional
	Role MemberRole `json:"role,omitempty"`
	// ready is true when the member passes etcd health checks.
	// +optional
	Ready bool `json:"ready,omitempty"`
	// version is the etcd server version the member reports.
	// +optional
	Version string `json:"version,omitempty"`
	// dataVersion is the etcd version the member's data was last written by, as its etcd reported
	// it while running. It outlives the Pod: between a Pod's deletion and its successor's start it
	// is the only evidence of what the data needs, so a version edit made then cannot rebuild the
	// member on an etcd that refuses its data.
	// +optional
	DataVersion *DataVersion `json:"dataVersion,omitempty"`
	// defragmentation records the member's defragmentation in flight (intent) and the latest one.
	// +optional
	Defragmentation *MemberDefragmentation `json:"defragmentation,omitempty"`
	// conditions of the member.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DataVersion is the etcd version a member's data was last written by.
type DataVersion struct {
	// server is the etcd server version that last ran on the data (X.Y.Z).
	// +optional
	Server string `json:"server,omitempty"`
	// storage is the data's storage version as etcd reported it (etcd 3.6 and later write one, e.g.
	// "3.6.0", once every member of the cluster runs their minor). Empty: the data carries none, so
	// it is etcd 3.5's or older, which etcd 3.7 and later refuse to start on.
	// +optional
	Storage string `json:"storage,omitempty"`
}

// EtcdMember is one member of an EtcdCluster. It is owned and written only by the Steward operator:
// it records the template the member runs and the intent of the step in progress. Edit the
// EtcdCluster instead; edits here are overwritten.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=etcdmember,categories=steward
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Role",type=string,JSONPath=`.status.role`
// +kubebuilder:printcolumn:name="Ready",type=boolean,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.template.version`
// +kubebuilder:printcolumn:name="ID",type=string,priority=1,JSONPath=`.status.id`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdMember struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec EtcdMemberSpec `json:"spec"`
	// +optional
	Status EtcdMemberStatus `json:"status,omitempty"`
}

// EtcdMemberList is a list of EtcdMember.
// +kubebuilder:object:root=true
type EtcdMemberList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdMember `json:"items"`
}
