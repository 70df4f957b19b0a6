package plan

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/health"
)

// Condition types on EtcdCluster.status.conditions.
const (
	ConditionAvailable     = "Available"
	ConditionProgressing   = "Progressing"
	ConditionDegraded      = "Degraded"
	ConditionRollingUpdate = "RollingUpdate"

	// PassStewardUpgrade is status.rollout.pass while members roll only because an older Steward
	// built their Pods (see Facts.PodRevision).
	PassStewardUpgrade = "StewardUpgrade"
)

// Reason is a CamelCase reason, used on actions and conditions alike.
type Reason string

const (
	ReasonReconciled              Reason = "Reconciled"
	ReasonPaused                  Reason = "Paused"
	ReasonClusterDeleting         Reason = "ClusterDeleting"
	ReasonInitialTarget           Reason = "InitialTarget"
	ReasonSpecChanged             Reason = "SpecChanged"
	ReasonVersionStepRefused      Reason = "VersionStepRefused"
	ReasonDowngrading             Reason = "Downgrading"
	ReasonBootstrapping           Reason = "Bootstrapping"
	ReasonRestoreRefused          Reason = "RestoreRefused"
	ReasonDormant                 Reason = "Dormant"
	ReasonGoingDormant            Reason = "GoingDormant"
	ReasonQuorumLost              Reason = "QuorumLost"
	ReasonQuorumHealthy           Reason = "QuorumHealthy"
	ReasonRecordingProgress       Reason = "RecordingProgress"
	ReasonJoiningMember           Reason = "JoiningMember"
	ReasonStartingMember          Reason = "StartingMember"
	ReasonPromotingLearner        Reason = "PromotingLearner"
	ReasonLearnerCatchingUp       Reason = "LearnerCatchingUp"
	ReasonLearnerStuck            Reason = "LearnerStuck"
	ReasonLearnerRefused          Reason = "LearnerRefused"
	ReasonExtraLearner            Reason = "ExtraLearner"
	ReasonRemovingMember          Reason = "RemovingMember"
	ReasonRemovingUnknownMember   Reason = "RemovingUnknownMember"
	ReasonCleaningUp              Reason = "CleaningUp"
	ReasonWaitingForPodDeletion   Reason = "WaitingForPodDeletion"
	ReasonMemberPodMissing        Reason = "MemberPodMissing"
	ReasonMemberDataLost          Reason = "MemberDataLost"
	ReasonMemberPodFailed         Reason = "MemberPodFailed"
	ReasonClusterIdentityMismatch Reason = "ClusterIdentityMismatch"
	ReasonMemberCrashLooping      Reason = "MemberCrashLooping"
	ReasonMemberOOMKilled         Reason = "MemberOOMKilled"
	ReasonMemberUnschedulable     Reason = "MemberUnschedulable"
	ReasonMemberUnhealthy         Reason = "MemberUnhealthy"
	ReasonAllMembersHealthy       Reason = "AllMembersHealthy"
	ReasonAlarm                   Reason = "Alarm"
	ReasonAuthenticating          Reason = "Authenticating"
	ReasonAuthWaiting             Reason = "AuthWaiting"
	ReasonAuthRefused             Reason = "AuthRefused"
	ReasonForeignPVC              Reason = "ForeignPVC"
	ReasonRollingMember           Reason = "RollingMember"
	ReasonMovingLeader            Reason = "MovingLeader"
	ReasonPatchingPodMetadata     Reason = "PatchingPodMetadata"
	ReasonResizingInPlace         Reason = "ResizingInPlace"
	ReasonWaitingForHealth        Reason = "WaitingForHealth"
	ReasonBlocked                 Reason = "Blocked"
	ReasonWaitingForDeletion      Reason = "WaitingForDeletion"
	ReasonUpToDate                Reason = "UpToDate"
	ReasonScalingUp               Reason = "ScalingUp"
	ReasonScalingDown             Reason = "ScalingDown"
	ReasonExpandingStorage        Reason = "ExpandingStorage"
	ReasonTLSMaterialNotReady     Reason = "TLSMaterialNotReady"
	ReasonCertificatesInProgress  Reason = "CertificatesInProgress"
	ReasonWaitingForClientRestart Reason = "WaitingForClientRestart"
	// ReasonStewardImageUnknown: the Steward image (which runs the data check) is unknown: no Pod starts.
	ReasonStewardImageUnknown      Reason = "StewardImageUnknown"
	ReasonStorageNotExpandable     Reason = "StorageNotExpandable"
	ReasonResizingFilesystem       Reason = "ResizingFilesystem"
	ReasonNoLeadershipTarget       Reason = "NoLeadershipTarget"
	ReasonProgressDeadlineExceeded Reason = "ProgressDeadlineExceeded"
	ReasonDefragmenting            Reason = "Defragmenting"
	// ReasonDefragmentationInterrupted: a defragmentation's end was not seen (the operator stopped).
	ReasonDefragmentationInterrupted Reason = "DefragmentationInterrupted"
	// ReasonDefragmentationFailing: a member's defragmentation failed DefragFailuresDegraded times in a row.
	ReasonDefragmentationFailing Reason = "DefragmentationFailing"
	// ReasonRecoveringFromNoSpace: recovering from a NOSPACE alarm; ReasonNoSpaceRecovered: disarming it;
	// ReasonQuotaFullOfLiveData: the live data alone fills the quota, only the user can help.
	ReasonRecoveringFromNoSpace Reason = "RecoveringFromNoSpace"
	ReasonNoSpaceRecovered      Reason = "NoSpaceRecovered"
	ReasonQuotaFullOfLiveData   Reason = "QuotaFullOfLiveData"
	// CORRUPT: a member replaced for it, the alarm disarmed after, or a human needed.
	ReasonMemberCorrupt         Reason = "MemberCorrupt"
	ReasonCorruptMemberReplaced Reason = "CorruptMemberReplaced"
	ReasonCorruptionNeedsHuman  Reason = "CorruptionNeedsHuman"
	// Adoption of a running cluster (spec.bootstrap.join).
	ReasonAdoptionPreflight Reason = "AdoptionPreflight"
	ReasonAdoptionRefused   Reason = "AdoptionRefused"
	ReasonHandingOver       Reason = "HandingOver"
	ReasonAbortingAdoption  Reason = "AbortingAdoption"
	ReasonAdoptionAborted   Reason = "AdoptionAborted"
	// Quorum-loss recovery.
	ReasonRecoveringQuorum        Reason = "RecoveringQuorum"
	ReasonFencingMember           Reason = "FencingMember"
	ReasonQuorumRecovered         Reason = "QuorumRecovered"
	ReasonQuorumRecoveryRefused   Reason = "QuorumRecoveryRefused"
	ReasonQuorumRecoveryNotNeeded Reason = "QuorumRecoveryNotNeeded"
	ReasonQuorumRecoveryAborted   Reason = "QuorumRecoveryAborted"
	// ReasonMembersUnreachable: the operator cannot reach enough members to know whether etcd has
	// quorum (or etcd shows quorum and the operator reaches too few to act); never a recovery.
	ReasonMembersUnreachable Reason = "MembersUnreachable"
	// Node loss (issue 25): a member replaced on another node, a replacement waiting for its
	// evidence to last, one withdrawn because the evidence went before the removal.
	ReasonMemberNodeLost     Reason = "MemberNodeLost"
	ReasonReplacingElsewhere Reason = "ReplacingElsewhere"
	ReasonWaitingForNodeLoss Reason = "WaitingForNodeLoss"
	ReasonNodeLossWithdrawn  Reason = "NodeLossWithdrawn"
	// ReasonPreparingEviction: a member whose eviction was asked for (a node drain) is being prepared
	// (leadership moved, out of the client Service); ReasonWaitingForEviction: it is prepared and
	// Kubernetes has yet to evict it.
	ReasonPreparingEviction  Reason = "PreparingEviction"
	ReasonWaitingForEviction Reason = "WaitingForEviction"
	// ReasonInvalidDefragmentationSchedule: the defragmentation schedule does not parse.
	ReasonInvalidDefragmentationSchedule Reason = "InvalidDefragmentationSchedule"
)

// Change says what a member needs to reach the target template. A roll subsumes a metadata patch.
type Change uint8

const (
	// ChangeRoll: a field that reaches the Pod spec or etcd flags differs: restart (PVC) or replace
	// (memory).
	ChangeRoll Change = 1 << iota
	// ChangeMetadata: podMetadata differs: patched in place.
	ChangeMetadata
	// ChangeExpand: the PVC is smaller than the target size: expanded in place.
	ChangeExpand
	// ChangeResize: only the container's CPU and memory differ, in a way the kubelet can apply to
	// the running Pod: resized in place, no restart.
	ChangeResize
)

// Has reports whether c includes x.
func (c Change) Has(x Change) bool { return c&x != 0 }

func (c Change) String() string {
	if c == 0 {
		return "none"
	}
	s := ""
	for _, p := range []struct {
		c Change
		n string
	}{{ChangeRoll, "roll"}, {ChangeMetadata, "metadata"}, {ChangeExpand, "expand"}, {ChangeResize, "resize"}} {
		if c.Has(p.c) {
			if s != "" {
				s += "+"
			}
			s += p.n
		}
	}
	return s
}

// Decision is the plan's answer: one action, and what status should say.
type Decision struct {
	// Action is the one thing to do in this reconcile.
	Action Action
	// Next is what would happen if the cluster were not paused (nil otherwise).
	Next *Action
	// Target is the template members are judged against: status.observed, or the spec when the
	// action adopts it.
	Target *stewardv1.MemberTemplate
	// Changes maps each member to what it needs; Updated lists members needing nothing.
	Changes map[string]Change
	// Outdated are members needing any change, by ordinal; Order are the members still to roll
	// (resize in place, restart or replace), in the order they will go; InPlace those resized.
	Outdated []string
	Order    []string
	InPlace  []string
	// DataVersions are, by member, the etcd version its data was last written by: what its etcd
	// reports while it answers, else its record (nil: never known), for EtcdMember status.dataVersion.
	DataVersions map[string]*stewardv1.DataVersion
	// Members, ReadyMembers, UpdatedMembers and Rollout are ready for EtcdCluster.status.
	Members        []stewardv1.MemberStatus
	ReadyMembers   int32
	UpdatedMembers int32
	Rollout        *stewardv1.RolloutStatus
	// Conditions carry Type, Status, Reason and Message; the controller sets generation and times.
	Conditions []metav1.Condition
	// Adoption is status.adoption (spec.bootstrap.join); nil for other clusters.
	Adoption *stewardv1.AdoptionStatus
	// Gate is the recovery gate over every expected voter.
	Gate health.Result
	// AdoptionRefused says why the spec is not the target yet (a version step no member may take
	// directly); the current rollout finishes first.
	AdoptionRefused string
	// VersionWarning is set when a version could not be parsed (a custom build): accepted, unchecked.
	VersionWarning string
	// Step is the step in progress and when it began, for status.lastStep (nil when settled).
	Step *stewardv1.StepRecord
	// DeadlineExceeded is true when the step in progress took longer than progressDeadlineSeconds.
	DeadlineExceeded bool
	// LostSince, LostObserver and RecoveryPlan are status.quorumRecovery's while etcd does not show
	// quorum (nil otherwise; LostSince only while its evidence shows the loss).
	LostSince    *metav1.Time
	LostObserver string
	RecoveryPlan *stewardv1.QuorumRecoveryPlan
	// DropRecoverAnnotation says why the recover-quorum annotation is to be removed (refused or
	// not needed); the controller removes it with an Event saying so. "" keeps it.
	DropRecoverAnnotation string
	// NodeLoss is status.nodeLoss: since when each member's node loss (etcd's silence, a cordon)
	// has been seen.
	NodeLoss []stewardv1.MemberNodeLoss
}

// Condition returns the condition of the given type.
func (d Decision) Condition(t string) metav1.Condition {
	for _, c := range d.Conditions {
		if c.Type == t {
			return c
		}
	}
	return metav1.Condition{}
}

// Reasons of the hardening pass (issue 10).
const (
	// ReasonPodStuckTerminating: a member's Pod has been terminating past Limits.StuckTerminating.
	ReasonPodStuckTerminating Reason = "PodStuckTerminating"
)
