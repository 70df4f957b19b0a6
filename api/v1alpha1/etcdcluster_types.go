package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdClusterSpec is the desired state of an etcd cluster.
// +kubebuilder:validation:XValidation:rule="!has(self.auth) || !self.auth.enabled || !has(self.tls) || !has(self.tls.enabled) || self.tls.enabled",message="spec.auth needs spec.tls enabled: Steward keeps its own access through a client certificate etcd maps to root"
// +kubebuilder:validation:XValidation:rule="!has(self.auth) || !has(self.tls) || !has(self.tls.peer) || !has(self.tls.peer.source) || self.tls.peer.source == 'Operator'",message="spec.auth needs certificates Steward issues (spec.tls source Operator): Steward keeps its own and the backups' access through client certificates it issues (common names steward-operator and steward-backup, root in etcd), and revokes a removed user's through a list it signs with the cluster's CA"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.auth) || !oldSelf.auth.enabled || has(self.auth)",message="spec.auth cannot be removed while auth is on: set spec.auth.enabled to false first"
// +kubebuilder:validation:XValidation:rule="!(has(self.storage.medium) && self.storage.medium == 'Memory' && self.replicas == 0)",message="spec.replicas: 0 is refused with spec.storage.medium Memory: a memory-backed cluster scaled to zero loses all its data"
// +kubebuilder:validation:XValidation:rule="!has(self.updateStrategy.maxSurge) || (has(self.storage.medium) && self.storage.medium == 'Memory')",message="spec.updateStrategy.maxSurge applies to spec.storage.medium Memory only: PVC members restart on their volumes, with no surge member"
// +kubebuilder:validation:XValidation:rule="!has(self.podDisruptionBudget) || !has(self.podDisruptionBudget.minAvailable) || self.podDisruptionBudget.minAvailable <= self.replicas",message="spec.podDisruptionBudget.minAvailable cannot exceed spec.replicas"
// +kubebuilder:validation:XValidation:rule="has(self.bootstrap) == has(oldSelf.bootstrap) && (!has(self.bootstrap) || (has(self.bootstrap.restore) == has(oldSelf.bootstrap.restore) && (!has(self.bootstrap.restore) || self.bootstrap.restore == oldSelf.bootstrap.restore) && has(self.bootstrap.join) == has(oldSelf.bootstrap.join) && (!has(self.bootstrap.join) || (self.bootstrap.join.endpoints == oldSelf.bootstrap.join.endpoints && has(self.bootstrap.join.statefulSetName) == has(oldSelf.bootstrap.join.statefulSetName) && (!has(self.bootstrap.join.statefulSetName) || self.bootstrap.join.statefulSetName == oldSelf.bootstrap.join.statefulSetName)))))",message="spec.bootstrap is immutable: it is read only when the cluster is created (only spec.bootstrap.join.abort may change)"
// +kubebuilder:validation:XValidation:rule="self.version == oldSelf.version || !self.version.matches('^[0-9]+\\\\.[0-9]+\\\\.[0-9]+$') || !oldSelf.version.matches('^[0-9]+\\\\.[0-9]+\\\\.[0-9]+$') || (int(self.version.split('.')[0]) == int(oldSelf.version.split('.')[0]) && (int(self.version.split('.')[1]) == int(oldSelf.version.split('.')[1]) || int(self.version.split('.')[1]) == int(oldSelf.version.split('.')[1]) + 1 || int(self.version.split('.')[1]) + 1 == int(oldSelf.version.split('.')[1])))",messageExpression="'spec.version: ' + oldSelf.version + ' -> ' + self.version + ' is refused: etcd upgrades and downgrades one minor version at a time (a downgrade goes through the etcd downgrade protocol); patch changes within a minor are allowed'"
// +kubebuilder:validation:XValidation:rule="!has(self.bootstrap) || !has(self.bootstrap.join) || !self.bootstrap.join.endpoints.all(e, e.startsWith('http://')) || (has(self.tls) && has(self.tls.enabled) && !self.tls.enabled)",message="spec.bootstrap.join: a plaintext (http://) source is adopted with spec.tls.enabled false (it is fixed at creation)"
// +kubebuilder:validation:XValidation:rule="!has(self.bootstrap) || !has(self.bootstrap.join) || !has(self.bootstrap.join.caSecretName) || !has(self.tls) || ((!has(self.tls.enabled) || self.tls.enabled) && (!has(self.tls.peer) || !has(self.tls.peer.source) || self.tls.peer.source == 'Operator') && (!has(self.tls.client) || !has(self.tls.client.source) || self.tls.client.source == 'Operator'))",message="spec.bootstrap.join.caSecretName: a TLS source is adopted with spec.tls enabled and source Operator on both planes (Steward issues every certificate from the source's CA)"
type EtcdClusterSpec struct {
	// replicas is the number of etcd members. 0 makes a PVC-backed cluster dormant: Pods go, PVCs
	// and the data stay, and scaling up again reuses them. Odd numbers (1, 3, 5) tolerate the most
	// failures for their size.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=9
	Replicas *int32 `json:"replicas,omitempty"`

	// paused stops every roll and scale step; status stays fresh and shows what would happen next.
	// +optional
	Paused bool `json:"paused,omitempty"`

	MemberTemplate `json:",inline"`

	// updateStrategy says how changed settings reach running members.
	// +optional
	// +kubebuilder:default={}
	UpdateStrategy UpdateStrategy `json:"updateStrategy"`

	// podDisruptionBudget over member Pods; managed by default with minAvailable one less than the
	// larger of replicas and the voter Pods there are (one eviction at a time, a surge counted).
	// +optional
	PodDisruptionBudget *PodDisruptionBudgetSpec `json:"podDisruptionBudget,omitempty"`

	// progressDeadlineSeconds: a rollout or scale step that takes longer sets Progressing=False with
	// reason ProgressDeadlineExceeded. The step is not abandoned; Steward keeps trying while safe.
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=30
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`

	// tls is mutual TLS on both planes, on by default with a CA Steward runs for the cluster.
	// +optional
	// +kubebuilder:default={}
	TLS *TLSSpec `json:"tls,omitempty"`

	// bootstrap seeds a new cluster from a snapshot (restore), or takes over a running one (join).
	// Read only at creation; immutable but for join.abort.
	// +optional
	Bootstrap *BootstrapSpec `json:"bootstrap,omitempty"`

	// quorumLoss is what Steward does when a majority of members is lost for good: status always
	// shows a recovery plan; Manual (the default) runs it when a human sets the annotation
	// etcd.steward.dev/recover-quorum, Automatic after afterSeconds.
	// +optional
	QuorumLoss *QuorumLossSpec `json:"quorumLoss,omitempty"`

	// nodeLoss is when Steward replaces a member lost with its node, or whose node-local volume's
	// node is deleted or cordoned for long, on another node under a new name (docs/operations.md,
	// "Node loss"). Defaults apply when unset.
	// +optional
	NodeLoss *NodeLossSpec `json:"nodeLoss,omitempty"`

	// maintenance is the upkeep Steward does on its own: defragmentation.
	// +optional
	// +kubebuilder:default={}
	Maintenance *MaintenanceSpec `json:"maintenance,omitempty"`

	// auth is etcd authentication: users, roles and per-tenant prefixes (docs/auth.md). Not yet
	// served: admission refuses it until Steward carries it out, rather than accept and ignore it.
	// +optional
	Auth *AuthSpec `json:"auth,omitempty"`
}

// UpdateStrategyType is how changed settings reach running members.
// +kubebuilder:validation:Enum=RollingUpdate;OnDelete
type UpdateStrategyType string

const (
	// RollingUpdate rolls outdated members one at a time, the leader last.
	RollingUpdate UpdateStrategyType = "RollingUpdate"
	// OnDelete marks members outdated and rebuilds a member only when the user deletes its Pod.
	OnDelete UpdateStrategyType = "OnDelete"
)

// UpdateStrategy says how changed settings reach running members.
type UpdateStrategy struct {
	// type is RollingUpdate (the default) or OnDelete.
	// +optional
	// +kubebuilder:default=RollingUpdate
	Type UpdateStrategyType `json:"type,omitempty"`

	// allowDowntime lets a single-member PVC cluster restart its only member to apply a change: a
	// full outage while it restarts. A single memory-backed member is never rolled (its data would
	// be lost).
	// +optional
	AllowDowntime bool `json:"allowDowntime,omitempty"`

	// maxSurge is how many members a memory-backed cluster may run beyond spec.replicas while a
	// roll replaces its members. 1 (the default) replaces a healthy outdated member add-first: a
	// new member (the lowest free ordinal, so names move on) joins as a learner and is promoted
	// before the outdated one is removed, so the cluster never runs below its voter count. 0
	// replaces remove-first (the old member leaves etcd, then a fresh one joins under its name):
	// for nodes without room for one more member Pod. A member that is down is always replaced
	// remove-first: etcd refuses a member add while the grown cluster lacks a connected quorum.
	// PVC members restart on their volumes and take no surge: set it with spec.storage.medium
	// Memory only.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1
	MaxSurge *int32 `json:"maxSurge,omitempty"`
}

// MaxSurge is how many members a roll or a drain of this cluster may add beyond spec.replicas:
// spec.updateStrategy.maxSurge for memory members (default 1); PVC members restart on their volumes
// and take none. The planner, the eviction webhook and `kubectl etcd plan` all read it here.
func (s *EtcdClusterSpec) MaxSurge() int {
	if s.Storage.Medium != StorageMediumMemory {
		return 0
	}
	if m := s.UpdateStrategy.MaxSurge; m != nil {
		return int(*m)
	}
	return 1
}

// PodDisruptionBudgetSpec configures the PodDisruptionBudget over member Pods. It limits evictions
// (node drains) only; the operator's own, one-at-a-time disruptions do not go through it.
// +kubebuilder:validation:XValidation:rule="!has(self.minAvailable) || !has(self.enabled) || self.enabled",message="spec.podDisruptionBudget.minAvailable needs the budget enabled"
type PodDisruptionBudgetSpec struct {
	// enabled creates and manages the budget (default true).
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// minAvailable overrides the default (one less than the larger of replicas and the voter Pods).
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinAvailable *int32 `json:"minAvailable,omitempty"`
}

// EtcdClusterStatus is what Steward last observed. Conditions Available, Progressing, Degraded and
// RollingUpdate say whether the cluster serves, is changing, is unhealthy, and how a rollout goes.
type EtcdClusterStatus struct {
	// observedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// observed is the member template Steward is moving members to. A spec change is adopted here at
	// the next safe point (no member disrupted), so the latest intent wins.
	// +optional
	Observed *MemberTemplate `json:"observed,omitempty"`

	// clusterID is etcd's cluster ID (hex) once the cluster has formed.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`

	// members are the cluster's members as last seen, by ordinal.
	// +optional
	// +listType=map
	// +listMapKey=name
	Members []MemberStatus `json:"members,omitempty"`

	// replicas is the number of members that exist (for the scale subresource).
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// readyMembers counts voting members that pass health checks.
	// +optional
	ReadyMembers int32 `json:"readyMembers,omitempty"`

	// updatedMembers counts members running the observed template.
	// +optional
	UpdatedMembers int32 `json:"updatedMembers,omitempty"`

	// lastStep is the last step Steward took, or the moment the cluster stopped being settled, and
	// when. progressDeadlineSeconds is timed from it: a step that takes longer sets
	// Progressing=False with reason ProgressDeadlineExceeded (the loop keeps trying while safe).
	// +optional
	LastStep *StepRecord `json:"lastStep,omitempty"`

	// currentTemplate is a short digest of the observed template: a label for humans to compare,
	// never used to decide anything.
	// +optional
	CurrentTemplate string `json:"currentTemplate,omitempty"`

	// selector is the label selector of member Pods (for the scale subresource).
	// +optional
	Selector string `json:"selector,omitempty"`

	// rollout says what the rollout engine is doing and what it waits for.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`

	// tls shows certificate expiries and the CA rotation pass.
	// +optional
	TLS *TLSStatus `json:"tls,omitempty"`

	// backup is the newest successful backup of this cluster.
	// +optional
	Backup *BackupSummary `json:"backup,omitempty"`

	// quorumRecovery shows, while quorum is lost, the recovery plan; during a recovery its step;
	// and the last recovery.
	// +optional
	QuorumRecovery *QuorumRecoveryStatus `json:"quorumRecovery,omitempty"`

	// nodeLoss records, per member, since when Steward has seen the evidence that its node (or its
	// volume's node) is lost or cordoned: the clocks of spec.nodeLoss, kept across reconciles.
	// +optional
	// +listType=map
	// +listMapKey=member
	NodeLoss []MemberNodeLoss `json:"nodeLoss,omitempty"`

	// maintenance records cluster-wide maintenance Steward did (compaction, alarm disarm).
	// +optional
	Maintenance *MaintenanceStatus `json:"maintenance,omitempty"`

	// restore records the snapshot this cluster was restored from.
	// +optional
	Restore *RestoreStatus `json:"restore,omitempty"`

	// adoption is the take-over of a running cluster (spec.bootstrap.join).
	// +optional
	Adoption *AdoptionStatus `json:"adoption,omitempty"`

	// downgrade is the downgrade through etcd's protocol in progress, or the last one.
	// +optional
	Downgrade *DowngradeStatus `json:"downgrade,omitempty"`

	// auth is etcd authentication's state (spec.auth).
	// +optional
	Auth *AuthStatus `json:"auth,omitempty"`

	// conditions: Available, Progressing, Degraded, RollingUpdate, PlacementAtRisk, with TLS TLSMaterialValid and
	// CertificatesExpiring, BackupReady when a schedule targets the cluster, and Restored when it
	// bootstraps from a backup.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MemberRole is a member's role in Raft.
// +kubebuilder:validation:Enum=Leader;Follower;Learner;Unknown
type MemberRole string

const (
	RoleLeader   MemberRole = "Leader"
	RoleFollower MemberRole = "Follower"
	RoleLearner  MemberRole = "Learner"
	RoleUnknown  MemberRole = "Unknown"
)

// MemberStatus is one member as last seen.
type MemberStatus struct {
	// name of the EtcdMember and its Pod.
	Name string `json:"name"`
	// id is etcd's member ID (hex), once the member was added.
	// +optional
	ID string `json:"id,omitempty"`
	// role in Raft.
	// +optional
	Role MemberRole `json:"role,omitempty"`
	// ready is true when the member passes etcd health checks, not only Pod readiness.
	// +optional
	Ready bool `json:"ready,omitempty"`
	// version is the etcd server version the member reports.
	// +optional
	Version string `json:"version,omitempty"`
	// node the member's Pod is scheduled on, and that node's zone (its topology.kubernetes.io/zone
	// label; empty when the node has none).
	// +optional
	Node string `json:"node,omitempty"`
	// +optional
	Zone string `json:"zone,omitempty"`
	// updated is true when the member runs the observed template.
	// +optional
	Updated bool `json:"updated,omitempty"`
	// dbSize is the size of the member's backend database file; dbSizeInUse the part holding
	// live data (the rest is free pages a defragmentation returns to the filesystem).
	// +optional
	DBSize *resource.Quantity `json:"dbSize,omitempty"`
	// +optional
	DBSizeInUse *resource.Quantity `json:"dbSizeInUse,omitempty"`
	// quota is the backend quota (--quota-backend-bytes); etcd raises NOSPACE when dbSize
	// would pass it. quotaUsedPercent is dbSize / quota.
	// +optional
	Quota *resource.Quantity `json:"quota,omitempty"`
	// +optional
	QuotaUsedPercent *int32 `json:"quotaUsedPercent,omitempty"`
	// alarms are the active etcd alarms this member raised (NOSPACE, CORRUPT).
	// +optional
	Alarms []string `json:"alarms,omitempty"`
	// defragmentation is the member's latest defragmentation and failure count.
	// +optional
	Defragmentation *MemberDefragmentation `json:"defragmentation,omitempty"`
}

// StepRecord names the step in progress and when it began.
type StepRecord struct {
	// action is the latest action of the step, as Steward logs it (for example
	// "DeletePod demo-2 (RollingMember)"), or "Wait" when the cluster left its settled state
	// without a step of Steward's.
	Action string `json:"action"`
	// member the step is about; "" for a cluster-wide step. Every action on the same member (a Pod
	// deleted and recreated, a learner added, timed out and added again) belongs to one step, so a
	// member that never comes back exceeds the deadline however often it is retried.
	// +optional
	Member string `json:"member,omitempty"`
	// since is when the step began.
	Since metav1.Time `json:"since"`
}

// RolloutStatus shows the rollout engine's plan, also while paused or with OnDelete.
type RolloutStatus struct {
	// pass is the name of the pass in progress (most changes have one pass; CA rotation has several).
	// +optional
	Pass string `json:"pass,omitempty"`
	// member being rolled now, if any.
	// +optional
	Member string `json:"member,omitempty"`
	// pending are the outdated members still to roll, in the order they will go.
	// +optional
	// +listType=atomic
	Pending []string `json:"pending,omitempty"`
	// inPlace are the outdated members whose change goes without a restart: CPU and memory resized
	// in the running Pod (the others restart, or are replaced on memory storage).
	// +optional
	// +listType=atomic
	InPlace []string `json:"inPlace,omitempty"`
	// waitingFor says why the engine is not rolling right now, if it is not.
	// +optional
	WaitingFor string `json:"waitingFor,omitempty"`
}

// EtcdCluster is an etcd cluster managed by Steward. Every spec change reaches every member, one
// member at a time, or is refused at admission with a message saying why.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=etcd;etcds,categories=steward
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyMembers`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Updated",type=integer,JSONPath=`.status.updatedMembers`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Rollout",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="RollingUpdate")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(self.spec.auth) || !has(self.spec.auth.users) || self.spec.auth.users.all(u, u.name != self.metadata.name + '-client')",message="spec.auth.users[].name: <cluster>-client is Steward's own user (the shared client certificate keeps full access)"
type EtcdCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec EtcdClusterSpec `json:"spec"`
	// +optional
	Status EtcdClusterStatus `json:"status,omitempty"`
}

// EtcdClusterList is a list of EtcdCluster.
// +kubebuilder:object:root=true
type EtcdClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdCluster `json:"items"`
}
