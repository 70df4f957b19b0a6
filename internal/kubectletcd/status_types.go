package kubectletcd

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// Status is what `kubectl etcd status -o json|yaml` prints. It is the plugin's own struct, not
// the EtcdCluster's status, so scripts keep working when the API grows: fields are only ever
// added. Sizes are bytes, times RFC 3339 UTC. docs/kubectl-plugin.md documents every field.
type Status struct {
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace"`
	// Version is spec.version, the version members are moving to.
	Version   string `json:"version"`
	ClusterID string `json:"clusterID,omitempty"`
	Paused    bool   `json:"paused"`
	// Available: "True" while a quorum of voters is healthy.
	Available  string `json:"available"`
	QuorumLost bool   `json:"quorumLost"`
	// MembersUnreachable: the operator cannot reach enough members to know whether etcd has
	// quorum (Available reason MembersUnreachable); no recovery runs on that alone.
	MembersUnreachable bool  `json:"membersUnreachable,omitempty"`
	Desired            int32 `json:"desired"`
	// Replicas counts the members that exist now.
	Replicas       int32 `json:"replicas"`
	ReadyMembers   int32 `json:"readyMembers"`
	UpdatedMembers int32 `json:"updatedMembers"`
	// Template is the short digest of the template members are moving to.
	Template string       `json:"template,omitempty"`
	Leader   string       `json:"leader,omitempty"`
	Rollout  *RolloutView `json:"rollout,omitempty"`
	Step     *StepView    `json:"step,omitempty"`
	Members  []MemberView `json:"members"`
	Alarms   []AlarmView  `json:"alarms"`
	TLS      TLSView      `json:"tls"`
	Backup   BackupView   `json:"backup"`
	Quorum   *QuorumView  `json:"quorumRecovery,omitempty"`
	Restore  *RestoreView `json:"restoredFrom,omitempty"`
	// Downgrade is status.downgrade: the downgrade through etcd's protocol in progress, or the last.
	Downgrade *stewardv1.DowngradeStatus `json:"downgrade,omitempty"`
	// Adoption is status.adoption of a cluster taking over a running one.
	Adoption *stewardv1.AdoptionStatus `json:"adoption,omitempty"`
	Conds    []ConditionView           `json:"conditions"`
	// Live is filled only by `status --etcd`, which asks each member directly.
	Live []LiveMember `json:"live,omitempty"`
}

// MemberView is one member as status and its EtcdMember record it.
type MemberView struct {
	Name string `json:"name"`
	ID   string `json:"id,omitempty"`
	// Role: Leader, Follower, Learner or Unknown.
	Role    string `json:"role"`
	Ready   bool   `json:"ready"`
	Version string `json:"version,omitempty"`
	// Updated: the member runs the template the cluster is moving to.
	Updated bool `json:"updated"`
	// Phase is the EtcdMember's phase (Pending, Joining, Learner, Running, Removing).
	Phase            string          `json:"phase,omitempty"`
	DBSize           int64           `json:"dbSize,omitempty"`
	DBSizeInUse      int64           `json:"dbSizeInUse,omitempty"`
	Quota            int64           `json:"quota,omitempty"`
	QuotaUsedPercent *int32          `json:"quotaUsedPercent,omitempty"`
	Alarms           []string        `json:"alarms,omitempty"`
	Defrag           *DefragView     `json:"lastDefragmentation,omitempty"`
	Defragmenting    *metav1.Time    `json:"defragmentingSince,omitempty"`
	Conditions       []ConditionView `json:"conditions,omitempty"`
}

// DefragView is a member's latest finished defragmentation.
type DefragView struct {
	Time       metav1.Time `json:"time"`
	Outcome    string      `json:"outcome"`
	Trigger    string      `json:"trigger,omitempty"`
	SizeBefore int64       `json:"sizeBefore,omitempty"`
	SizeAfter  int64       `json:"sizeAfter,omitempty"`
}

// AlarmView is one active alarm and the member that raised it.
type AlarmView struct {
	Member string `json:"member"`
	Alarm  string `json:"alarm"`
}

// RolloutView is what the rollout engine does or waits for.
type RolloutView struct {
	Pass       string   `json:"pass,omitempty"`
	Member     string   `json:"member,omitempty"`
	Pending    []string `json:"pending,omitempty"`
	InPlace    []string `json:"inPlace,omitempty"`
	WaitingFor string   `json:"waitingFor,omitempty"`
}

// StepView is the step in progress.
type StepView struct {
	Action string      `json:"action"`
	Member string      `json:"member,omitempty"`
	Since  metav1.Time `json:"since"`
}

// TLSView summarizes certificates: the CA and the leaf that expires first.
type TLSView struct {
	Enabled      bool           `json:"enabled"`
	CANotAfter   *metav1.Time   `json:"caNotAfter,omitempty"`
	Rotation     string         `json:"rotation,omitempty"`
	NextExpiry   *CertView      `json:"nextExpiry,omitempty"`
	Certificates []CertView     `json:"certificates,omitempty"`
	DropOldCA    *DropOldCAView `json:"dropOldCA,omitempty"`
}

// CertView is one certificate's expiry.
type CertView struct {
	Name     string       `json:"name"`
	NotAfter metav1.Time  `json:"notAfter"`
	RenewAt  *metav1.Time `json:"renewAt,omitempty"`
	Served   bool         `json:"served"`
}

// DropOldCAView is a CA rotation waiting for clients to restart.
type DropOldCAView struct {
	After   metav1.Time `json:"after"`
	Message string      `json:"message"`
}

// BackupView is the newest successful backup and the latest attempts.
type BackupView struct {
	LastSuccessful *BackupItem  `json:"lastSuccessful,omitempty"`
	Recent         []BackupItem `json:"recent,omitempty"`
	// Continuous is status.backup.continuous: how far the continuous backup has got, and its
	// last drill.
	Continuous *stewardv1.ContinuousSummary `json:"continuous,omitempty"`
}

// BackupItem is one EtcdBackup.
type BackupItem struct {
	Name     string       `json:"name"`
	Phase    string       `json:"phase,omitempty"`
	Time     *metav1.Time `json:"time,omitempty"`
	Revision int64        `json:"revision,omitempty"`
	Size     int64        `json:"size,omitempty"`
	Verified *bool        `json:"verified,omitempty"`
	Message  string       `json:"message,omitempty"`
}

// QuorumView is status.quorumRecovery: the plan while quorum is lost, a recovery in flight, the
// last one.
type QuorumView struct {
	LostSince  *metav1.Time                      `json:"lostSince,omitempty"`
	Plan       *stewardv1.QuorumRecoveryPlan     `json:"plan,omitempty"`
	InProgress *stewardv1.QuorumRecoveryProgress `json:"inProgress,omitempty"`
	Last       *stewardv1.QuorumRecoveryRecord   `json:"last,omitempty"`
	// Policy is spec.quorumLoss.policy; Requested the recover-quorum annotation, if set.
	Policy    stewardv1.QuorumLossPolicy `json:"policy"`
	Requested string                     `json:"requested,omitempty"`
}

// RestoreView is where a restored cluster's data came from.
type RestoreView struct {
	Source     string       `json:"source"`
	Revision   int64        `json:"revision,omitempty"`
	RestoredAt *metav1.Time `json:"restoredAt,omitempty"`
}

// ConditionView is one condition.
type ConditionView struct {
	Type    string       `json:"type"`
	Status  string       `json:"status"`
	Reason  string       `json:"reason,omitempty"`
	Message string       `json:"message,omitempty"`
	Since   *metav1.Time `json:"since,omitempty"`
}

// LiveMember is what one member's etcd answered to a Status call (`status --etcd`).
type LiveMember struct {
	Name      string `json:"name"`
	Endpoint  string `json:"-"`
	Leader    string `json:"leader,omitempty"`
	Term      uint64 `json:"raftTerm,omitempty"`
	Index     uint64 `json:"raftIndex,omitempty"`
	Applied   uint64 `json:"raftAppliedIndex,omitempty"`
	Revision  int64  `json:"revision,omitempty"`
	DBSize    int64  `json:"dbSize,omitempty"`
	InUse     int64  `json:"dbSizeInUse,omitempty"`
	IsLearner bool   `json:"isLearner,omitempty"`
	Error     string `json:"error,omitempty"`
}
