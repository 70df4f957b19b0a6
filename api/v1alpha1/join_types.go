package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// JoinSpec names a running etcd cluster Steward takes over instead of bootstrapping a new one
// (adoption). Steward's members join it one at a time as learners, are promoted, and each then
// replaces one source member, which is removed from etcd; the cluster keeps its ID, its data and
// its revisions, and clients are served throughout. Read only at creation: only abort may change.
//
// A TLS source (https:// endpoints) is adopted with its CA: caSecretName holds the CA's certificate
// and key, and Steward issues every certificate from it (its members' peer and server certificates,
// its own client certificate), so the source's members and clients trust Steward's members and
// Steward's members trust them, with nothing to change on the source. Both planes must match the
// source's: a source with plaintext peers and TLS clients cannot be adopted yet (the preflight's
// PeerScheme check says so).
// +kubebuilder:validation:XValidation:rule="self.endpoints.all(e, e.startsWith('http://')) || self.endpoints.all(e, e.startsWith('https://'))",message="spec.bootstrap.join.endpoints: all http:// (a plaintext source) or all https:// (a TLS source), not both"
// +kubebuilder:validation:XValidation:rule="!self.endpoints.exists(e, e.startsWith('https://')) || has(self.caSecretName)",message="spec.bootstrap.join.caSecretName is required for a TLS (https://) source: a Secret with the source's CA certificate and key (tls.crt and tls.key), from which Steward issues certificates the source trusts"
// +kubebuilder:validation:XValidation:rule="!has(self.caSecretName) || self.endpoints.all(e, e.startsWith('https://'))",message="spec.bootstrap.join.caSecretName is only used with a TLS (https://) source"
// +kubebuilder:validation:XValidation:rule="has(self.caSecretName) == has(oldSelf.caSecretName) && (!has(self.caSecretName) || self.caSecretName == oldSelf.caSecretName)",message="spec.bootstrap.join.caSecretName is read only when the cluster is created and cannot change"
type JoinSpec struct {
	// endpoints are client URLs of the running cluster's members (one answering is enough; the
	// member list names the rest), e.g. http://etcd-0.etcd-headless.ns.svc.cluster.local:2379.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^https?://[^/?#]+/?$`
	Endpoints []string `json:"endpoints"`
	// statefulSetName is the StatefulSet in this namespace whose Pods run the source members.
	// Steward scales it down by one after each of its members left etcd (highest ordinal first,
	// as a StatefulSet scales down), and checks that Pod is gone before the next. Unset: Steward
	// only removes source members from etcd, and status.adoption says which processes to stop.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	StatefulSetName string `json:"statefulSetName,omitempty"`
	// caSecretName (TLS sources) names a Secret in this namespace with the source's CA: tls.crt and
	// tls.key (what kubectl create secret tls writes), or ca.crt and ca.key. Steward copies it
	// into its own CA Secret (<cluster>-ca) when the cluster is created and issues every
	// certificate from it; a later spec.tls.rotateCA moves the cluster off the source's CA. No CA
	// rotation starts while the adoption runs: the source's members trust only the source's CA.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	CASecretName string `json:"caSecretName,omitempty"`
	// abort stops the adoption: Steward's members are removed from etcd one at a time and the
	// source is left as it was. Once the last source member was removed there is nothing to go
	// back to, and abort does nothing (status says so). The only field here that may change.
	// +optional
	Abort bool `json:"abort,omitempty"`
}

// AdoptionPhase is where an adoption stands.
// +kubebuilder:validation:Enum=Preflight;Refused;HandingOver;Done;Aborting;Aborted
type AdoptionPhase string

const (
	// AdoptionPreflight: the source is being checked; nothing of it has changed.
	AdoptionPreflight AdoptionPhase = "Preflight"
	// AdoptionRefused: a check failed; nothing of the source has changed. Message says the way out.
	AdoptionRefused AdoptionPhase = "Refused"
	// AdoptionHandingOver: Steward's members are joining and source members leaving, one at a time.
	AdoptionHandingOver AdoptionPhase = "HandingOver"
	// AdoptionDone: no source member is left in etcd; the cluster is an ordinary Steward cluster.
	AdoptionDone AdoptionPhase = "Done"
	// AdoptionAborting: Steward's members are leaving etcd one at a time.
	AdoptionAborting AdoptionPhase = "Aborting"
	// AdoptionAborted: no Steward member is left in etcd; the source runs as it did.
	AdoptionAborted AdoptionPhase = "Aborted"
)

// AdoptionStatus is the adoption of a running cluster (spec.bootstrap.join).
type AdoptionStatus struct {
	// phase: Preflight, Refused, HandingOver, Done, Aborting or Aborted.
	Phase AdoptionPhase `json:"phase"`
	// clusterID is the source's etcd cluster ID, recorded at the preflight; the adopted cluster
	// keeps it.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`
	// version is the source's cluster version at the preflight.
	// +optional
	Version string `json:"version,omitempty"`
	// checks are the preflight's checks, in the order they run.
	// +optional
	Checks []AdoptionCheck `json:"checks,omitempty"`
	// sourceMembers are the source's members as Steward found them, and what became of them.
	// +optional
	SourceMembers []SourceMember `json:"sourceMembers,omitempty"`
	// message says what the adoption does or waits for now, or what to do.
	// +optional
	Message string `json:"message,omitempty"`
	// startedAt is when the first Steward member was added; finishedAt when the phase became Done
	// or Aborted.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
}

// AdoptionCheck is one preflight check.
type AdoptionCheck struct {
	// name of the check: Reachable, Version, Healthy, NoLearner, NoAlarm, Auth, PeerScheme, Quota,
	// Names, StatefulSet.
	Name string `json:"name"`
	// passed is true when the check passed.
	Passed bool `json:"passed"`
	// message says what was found and, for a failed check, the way out.
	// +optional
	Message string `json:"message,omitempty"`
}

// SourceMemberState is what became of a source member.
// +kubebuilder:validation:Enum=Serving;Removed;Stopped
type SourceMemberState string

const (
	// SourceServing: still a member of the cluster.
	SourceServing SourceMemberState = "Serving"
	// SourceRemoved: removed from etcd; its process still has to be stopped by its owner (or by
	// Steward's StatefulSet scale-down, which is under way).
	SourceRemoved SourceMemberState = "Removed"
	// SourceStopped: removed from etcd and its Pod is gone (statefulSetName only).
	SourceStopped SourceMemberState = "Stopped"
)

// SourceMember is one member of the adopted cluster that Steward did not create.
type SourceMember struct {
	// name is the member's etcd name.
	Name string `json:"name"`
	// id is its etcd member ID (hex).
	ID string `json:"id"`
	// peerURL is its first peer URL.
	// +optional
	PeerURL string `json:"peerURL,omitempty"`
	// pod is the StatefulSet Pod that runs it, matched by peer URL (statefulSetName only).
	// +optional
	Pod string `json:"pod,omitempty"`
	// state: Serving, Removed or Stopped.
	State SourceMemberState `json:"state"`
}
