package plan

import (
	"fmt"

	"github.com/etcd-steward/steward/internal/authplan"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
)

// Kind is what the controller should do. Each kind is one step; where it writes intent first, the
// comment says so, so a crash between the intent and the effect is resumed from live facts.
type Kind string

const (
	// Nothing: the cluster is where it should be.
	Nothing Kind = "Nothing"
	// Wait: something must happen first that the operator does not do (a Pod starting, a learner
	// catching up, health recovering, the user changing the spec). Reason and Message say what.
	Wait Kind = "Wait"

	// AdoptSpec copies the spec's member template into status.observed.
	AdoptSpec Kind = "AdoptSpec"
	// CreateMember creates EtcdMember <cluster>-<Ordinal> in phase Pending with the observed template.
	CreateMember Kind = "CreateMember"
	// BootstrapSeed creates the seed member's PVC and Pod with --initial-cluster-state=new and an
	// initial cluster of itself alone, recording the observed template on the member first.
	BootstrapSeed Kind = "BootstrapSeed"
	// AddLearner writes phase Joining (intent), calls MemberAddAsLearner with the member's peer URL,
	// then writes phase Learner and the new ID.
	AddLearner Kind = "AddLearner"
	// CreatePod records the observed template on the member, creates its PVC if missing, and creates
	// its Pod with --initial-cluster-state=existing and --initial-cluster from the live member list.
	CreatePod Kind = "CreatePod"
	// PromoteLearner calls MemberPromote for MemberID, then writes phase Running. etcd refusing
	// because the learner is not ready yet is a retry, not an error.
	PromoteLearner Kind = "PromoteLearner"
	// RecordPhase writes Phase and MemberID on the member: the live member list shows a step already
	// happened (the operator stopped between the etcd call and its status write).
	RecordPhase Kind = "RecordPhase"
	// RemoveMember writes phase Removing (intent), then removes MemberID from etcd through the
	// Disrupter (Disruption says how: Remove for good, or Replace by a fresh member).
	RemoveMember Kind = "RemoveMember"
	// DeletePod deletes the member's Pod through the Disrupter.
	DeletePod Kind = "DeletePod"
	// DeletePVC deletes the member's PVC through the Disrupter.
	DeletePVC Kind = "DeletePVC"
	// ResetMember turns a member removed for replacement back into a fresh one: phase Pending, no ID,
	// template = observed. Its Pod and PVC are already gone.
	ResetMember Kind = "ResetMember"
	// DeleteMember deletes the EtcdMember object: a scale-down starts (its finalizer then waits for
	// the plan), or a pending member above spec.replicas goes.
	DeleteMember Kind = "DeleteMember"
	// FinalizeMember removes the finalizer of a deleted member that has left etcd and whose Pod and
	// PVC are gone.
	FinalizeMember Kind = "FinalizeMember"
	// MoveLeader hands leadership from Member to Target (MoveLeader to TargetID). A failed move is
	// retried on the next reconcile; the leader's Pod is never touched while it leads.
	MoveLeader Kind = "MoveLeader"
	// RestartContainer changes the image of the member's etcd container in its running Pod, through
	// the Disrupter (kind RestartContainer): the kubelet restarts the container in place, keeping the
	// Pod, its IP and its volumes (a memory member's data too).
	RestartContainer Kind = "RestartContainer"
	// ResizePod asks the kubelet to resize the member Pod's etcd container to the observed
	// resources in place (the Pod's resize subresource): no restart, no disruption. A resize the API
	// refuses is marked on the Pod, and the member rolls instead.
	ResizePod Kind = "ResizePod"
	// RecordTemplate records the observed template on the member and on its Pod once the Pod runs
	// it without a rebuild: after an in-place resize, or a container restarted on a new image.
	RecordTemplate Kind = "RecordTemplate"
	// PatchPodMetadata patches the member Pod's labels and annotations in place to the observed
	// podMetadata (removing keys the member's recorded template added that are gone now), then
	// records the observed podMetadata on the member. No restart.
	PatchPodMetadata Kind = "PatchPodMetadata"
	// Defragment writes the member's status.defragmentation.startedAt (intent), defragments it
	// through the Disrupter, then records the result (Event, size before and after) and clears
	// the intent.
	Defragment Kind = "Defragment"
	// RecordDefragmentation closes a defragmentation whose end the operator did not see (it
	// stopped mid-call) as Interrupted, clearing the intent.
	RecordDefragmentation Kind = "RecordDefragmentation"
	// Compact compacts etcd's history up to Revision (physically: it returns once applied) and
	// records it in status.maintenance.lastCompaction with an Event. Repeating it is harmless.
	Compact Kind = "Compact"
	// DisarmAlarm disarms every active alarm of type Alarm (NOSPACE when empty) and records
	// status.maintenance.lastDisarm.
	DisarmAlarm Kind = "DisarmAlarm"
	// StartRecovery writes status.quorumRecovery.inProgress (Recovery: survivor, stage Fencing,
	// the members to discard): nothing is touched in this step.
	StartRecovery Kind = "StartRecovery"
	// RecoveryStep records the recovery's next Stage in status before it acts.
	RecoveryStep Kind = "RecoveryStep"
	// DetachMember drops a member replaced elsewhere after a node loss, once it left etcd, its Pod
	// was deleted and its successor created: its PVC is detached and kept like DiscardMember's (its
	// ordinal stays reserved), its finalizer released and the EtcdMember deleted. Its Pod may still
	// be Terminating on a lost node; it is never force-deleted.
	DetachMember Kind = "DetachMember"
	// DiscardMember drops a member a quorum recovery left behind: its PVC is detached (owner and
	// cluster label removed, labelled etcd.steward.dev/discarded-from) and kept; the EtcdMember goes.
	DiscardMember Kind = "DiscardMember"
	// FinishRecovery records status.quorumRecovery.last, clears inProgress and the trigger
	// annotation.
	FinishRecovery Kind = "FinishRecovery"
	// AbortRecovery records status.quorumRecovery.last as Aborted (the message says on what
	// evidence), clears inProgress and the trigger: etcd showed quorum again, or the survivor was
	// no longer the most advanced member, before the survivor was started with --force-new-cluster.
	AbortRecovery Kind = "AbortRecovery"
	// PrepareEviction prepares a member whose eviction Kubernetes was asked for (a node drain,
	// recorded on its Pod by the eviction webhook), through the Disrupter (kind Evict): the member
	// leaves the client Service, then its Pod is marked prepared, which lets the eviction through.
	// Leadership is moved off it first (a MoveLeader). Kubernetes deletes the Pod; repair recreates it.
	PrepareEviction Kind = "PrepareEviction"
	// ExpandPVC raises the member PVC's storage request to the observed size and records it on the
	// member's template.
	ExpandPVC Kind = "ExpandPVC"
	// ScaleSource scales the adopted source's StatefulSet (spec.bootstrap.join.statefulSetName)
	// from SourceReplicas+1 down to SourceReplicas, once the member its highest Pod runs has left
	// etcd; preconditioned on the replicas the plan saw.
	ScaleSource Kind = "ScaleSource"
	// Downgrade moves a downgrade through etcd's protocol to DowngradeStage, recorded in
	// status.downgrade: Enabling records the intent (from, target, the backup taken) and touches
	// nothing; Enabled runs etcd's downgrade validate and enable, then records the stage; Cancelling
	// records the stage, then runs etcd's downgrade cancel (idempotent); Completed and Cancelled
	// record the end.
	Downgrade Kind = "Downgrade"
	// StartHandOver records status.adoption.phase HandingOver and touches nothing else: the
	// adoption's first step may be a source member's removal (a source larger than replicas),
	// which leaves no Steward member behind to tell that the hand-over began, and a preflight run
	// again on what it changed would refuse it. Written before any step, it is that record.
	StartHandOver Kind = "StartHandOver"
	// Authenticate carries out etcd authentication's next step (Action.Auth, decided by
	// internal/authplan): a role, a user, a permission, auth on or off, or a record in status.auth
	// before a create. It disrupts nobody and runs only once the cluster is settled and healthy.
	Authenticate Kind = "Authenticate"
)

// Action is the one thing to do now.
type Action struct {
	Kind Kind
	// Member the action is about ("" for cluster-wide actions such as AdoptSpec).
	Member string
	// MemberID is the live etcd ID (RemoveMember, PromoteLearner, RecordPhase, MoveLeader's source).
	MemberID uint64
	// Ordinal for CreateMember.
	Ordinal int32
	// Phase for RecordPhase.
	Phase stewardv1.MemberPhase
	// Target and TargetID for MoveLeader.
	Target   string
	TargetID uint64
	// Disruption is set when the action disrupts a member: the controller must pass it to a
	// disruption.Disrupter together with Facts.DisruptionView().
	Disruption *disruption.Request
	// Replacing (RemoveMember, RecordPhase): the member leaves etcd to be replaced; the controller
	// records status.replacing with the phase, before the removal, and clears it once the member is
	// Running again.
	Replacing bool
	// ReplacedElsewhere (RemoveMember): the member is replaced under a new name after a node loss;
	// the controller records it (status.replacedElsewhere) with the phase, before the removal.
	ReplacedElsewhere string
	// Alarm (DisarmAlarm) is the alarm type to disarm; "" means NOSPACE.
	Alarm string
	// Recovery (StartRecovery) is the recovery to record; Stage (RecoveryStep) its next stage.
	// DowngradeStage is the stage a Downgrade action moves status.downgrade to; DowngradeFrom the
	// version the members ran (with Enabling).
	DowngradeStage stewardv1.DowngradeStage
	DowngradeFrom  string
	Recovery       *stewardv1.QuorumRecoveryProgress
	Stage          stewardv1.QuorumRecoveryStage
	// ForceNewCluster (CreatePod): start the member once with --force-new-cluster.
	ForceNewCluster bool
	// Revision and HeadRevision (Compact): compact to Revision; the head was HeadRevision.
	Revision, HeadRevision int64
	// SourceReplicas (ScaleSource): the source StatefulSet's replicas to set.
	SourceReplicas int32
	// DefragTrigger (Defragment): the threshold or the schedule.
	DefragTrigger stewardv1.DefragmentationTrigger
	// Auth (Authenticate) is the etcd authentication step to carry out.
	Auth *authplan.Step
	// Reason is a CamelCase reason for conditions; Message is for humans.
	Reason  Reason
	Message string
}

func (a Action) String() string {
	s := string(a.Kind)
	if a.Member != "" {
		s += " " + a.Member
	}
	if a.Target != "" {
		s += " -> " + a.Target
	}
	if a.Kind == CreateMember {
		s += fmt.Sprintf(" #%d", a.Ordinal)
	}
	if a.Reason != "" {
		s += " (" + string(a.Reason) + ")"
	}
	return s
}

// Acts reports whether the action changes something (it is not Nothing or Wait).
func (a Action) Acts() bool { return a.Kind.Acts() }

func act(k Kind, member string, reason Reason, format string, args ...any) Action {
	return Action{Kind: k, Member: member, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func wait(reason Reason, format string, args ...any) Action {
	return act(Wait, "", reason, format, args...)
}

func (a Action) disrupting(kind disruption.Kind) Action {
	a.Disruption = &disruption.Request{Kind: kind, Victim: a.Member}
	a.Replacing = kind == disruption.Replace || kind == disruption.ReplaceLost
	return a
}
