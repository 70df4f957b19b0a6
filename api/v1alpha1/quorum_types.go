package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// QuorumLossPolicy is whether Steward recovers a lost quorum on its own.
// +kubebuilder:validation:Enum=Manual;Automatic
type QuorumLossPolicy string

const (
	// QuorumLossManual: status shows the recovery plan; a human runs it with the annotation.
	QuorumLossManual QuorumLossPolicy = "Manual"
	// QuorumLossAutomatic: the plan runs once quorum has been lost for afterSeconds.
	QuorumLossAutomatic QuorumLossPolicy = "Automatic"
)

// QuorumLossSpec says what Steward does when a majority of members is lost for good.
type QuorumLossSpec struct {
	// policy: Manual (the default) or Automatic.
	// +optional
	// +kubebuilder:default=Manual
	Policy QuorumLossPolicy `json:"policy,omitempty"`
	// afterSeconds quorum must have been lost before Automatic recovers it.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=30
	AfterSeconds *int32 `json:"afterSeconds,omitempty"`
}

// QuorumRecoveryStage is the step of a quorum recovery in progress.
// +kubebuilder:validation:Enum=Fencing;ForceNewCluster;Restarting;Discarding;Reseeding
type QuorumRecoveryStage string

const (
	// RecoveryFencing: every member but the survivor loses its Pod (etcd must not find old
	// members alive when the survivor forms a new cluster).
	RecoveryFencing QuorumRecoveryStage = "Fencing"
	// RecoveryForceNewCluster: the survivor's Pod runs once with --force-new-cluster.
	RecoveryForceNewCluster QuorumRecoveryStage = "ForceNewCluster"
	// RecoveryRestarting: the survivor serves alone; its Pod is recreated without the flag.
	RecoveryRestarting QuorumRecoveryStage = "Restarting"
	// RecoveryDiscarding: the other members are dropped, their PVCs kept for forensics.
	RecoveryDiscarding QuorumRecoveryStage = "Discarding"
	// RecoveryReseeding: no member had data; every member was dropped and a new seed is
	// restored from the backup (restoreFrom), as spec.bootstrap.restore would.
	RecoveryReseeding QuorumRecoveryStage = "Reseeding"
)

// QuorumRecoveryStatus is everything about quorum loss and its recovery.
type QuorumRecoveryStatus struct {
	// lostSince is since when the running operator (observer) has seen etcd's evidence of quorum
	// loss without a break; cleared by any evidence of quorum, and when the evidence is incomplete.
	// +optional
	LostSince *metav1.Time `json:"lostSince,omitempty"`
	// observer is the operator process that has watched the loss since lostSince. Automatic counts
	// only time one process watched: another one (a restart, a new leader) starts the clock again.
	// +optional
	Observer string `json:"observer,omitempty"`
	// plan is what a recovery would do if run now; shown while quorum is lost.
	// +optional
	Plan *QuorumRecoveryPlan `json:"plan,omitempty"`
	// inProgress is written before each step of a recovery (intent), so a restarted operator
	// resumes it and never starts the survivor with --force-new-cluster twice.
	// +optional
	InProgress *QuorumRecoveryProgress `json:"inProgress,omitempty"`
	// last is the latest finished recovery.
	// +optional
	Last *QuorumRecoveryRecord `json:"last,omitempty"`
}

// QuorumRecoveryPlan names the survivor and what recovering from it loses.
type QuorumRecoveryPlan struct {
	// survivor is the reachable member with data and the highest raft index (ties: lowest
	// ordinal); "" when no member can be one (refused says why).
	// +optional
	Survivor string `json:"survivor,omitempty"`
	// raftIndex and revision of the survivor now.
	// +optional
	RaftIndex uint64 `json:"raftIndex,omitempty"`
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// discarded are the members whose data would be dropped (their PVCs are kept, detached).
	// +optional
	Discarded []string `json:"discarded,omitempty"`
	// loss says, for humans, what running the plan now would lose.
	// +optional
	Loss string `json:"loss,omitempty"`
	// restoreFrom is the newest successful EtcdBackup of this cluster, offered when no member has
	// data: running the plan rebuilds the cluster from it.
	// +optional
	RestoreFrom string `json:"restoreFrom,omitempty"`
	// refused says why no recovery can run.
	// +optional
	Refused string `json:"refused,omitempty"`
}

// QuorumRecoveryProgress is a recovery under way.
type QuorumRecoveryProgress struct {
	// survivor is "" when the recovery restores from a backup (restoreFrom).
	// +optional
	Survivor string `json:"survivor,omitempty"`
	// restoreFrom is the EtcdBackup a recovery without survivor restores.
	// +optional
	RestoreFrom string              `json:"restoreFrom,omitempty"`
	Stage       QuorumRecoveryStage `json:"stage"`
	Since       metav1.Time         `json:"since"`
	// trigger: the annotation's value, or "Automatic".
	Trigger string `json:"trigger"`
	// revision of the survivor when the recovery started.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// discarded are the members being dropped.
	// +optional
	Discarded []string `json:"discarded,omitempty"`
	// evidence is what etcd showed when the recovery started (why quorum was judged lost).
	// +optional
	Evidence string `json:"evidence,omitempty"`
}

// QuorumRecoveryOutcome is how a recovery ended.
// +kubebuilder:validation:Enum=Recovered;Aborted
type QuorumRecoveryOutcome string

const (
	// RecoveryRecovered: the cluster serves again from the survivor (or the backup).
	RecoveryRecovered QuorumRecoveryOutcome = "Recovered"
	// RecoveryAborted: etcd showed quorum again (or the survivor was no longer the most advanced
	// member) before the survivor was started with --force-new-cluster; nothing more was done.
	RecoveryAborted QuorumRecoveryOutcome = "Aborted"
)

// QuorumRecoveryRecord is a finished recovery.
type QuorumRecoveryRecord struct {
	Time metav1.Time `json:"time"`
	// outcome: Recovered, or Aborted (message says on what evidence). Empty in records written
	// before aborts existed, which were all recoveries.
	// +optional
	Outcome QuorumRecoveryOutcome `json:"outcome,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	Survivor string `json:"survivor,omitempty"`
	// +optional
	RestoreFrom string `json:"restoreFrom,omitempty"`
	Revision    int64  `json:"revision"`
	Trigger     string `json:"trigger"`
	// +optional
	Discarded []string `json:"discarded,omitempty"`
}
