package plan

// What each action kind is, in one place (issue 24): the controller, the simulator and the plan's
// own gates ask these methods instead of keeping lists of their own. Every switch below names every
// kind (the exhaustive linter enforces it), so a new kind cannot be added without deciding each.

// Kinds lists every action kind, in the order they are declared.
func Kinds() []Kind {
	return []Kind{Nothing, Wait, AdoptSpec, CreateMember, BootstrapSeed, AddLearner, CreatePod, PromoteLearner,
		RecordPhase, RemoveMember, DeletePod, DeletePVC, ResetMember, DeleteMember, FinalizeMember, MoveLeader,
		RestartContainer, ResizePod, RecordTemplate, PatchPodMetadata, Defragment, RecordDefragmentation, Compact,
		DisarmAlarm, StartRecovery, RecoveryStep, DetachMember, DiscardMember, FinishRecovery, AbortRecovery, PrepareEviction, ExpandPVC, ScaleSource, Downgrade, StartHandOver, Authenticate}
}

// Acts: the kind changes something (Nothing and Wait do not).
func (k Kind) Acts() bool { return k != Nothing && k != Wait }

// NeedsMember: carrying the action out reads or writes the EtcdMember it names, which must exist.
// RemoveMember and MoveLeader may instead name an etcd member no EtcdMember claims (OrphanAllowed).
func (k Kind) NeedsMember() bool {
	//exhaustive:enforce
	switch k {
	case Nothing, Wait, AdoptSpec, CreateMember, Compact, DisarmAlarm, StartRecovery, RecoveryStep, FinishRecovery,
		AbortRecovery, ScaleSource, Downgrade, StartHandOver, Authenticate:
		return false
	case BootstrapSeed, AddLearner, CreatePod, PromoteLearner, RecordPhase, RemoveMember, DeletePod, DeletePVC,
		ResetMember, DeleteMember, FinalizeMember, MoveLeader, RestartContainer, ResizePod, RecordTemplate,
		PatchPodMetadata, Defragment, RecordDefragmentation, DiscardMember, ExpandPVC, DetachMember, PrepareEviction:
		return true
	}
	return true
}

// OrphanAllowed: the action may name, by MemberID, an etcd member that no EtcdMember claims (an
// orphan the operator removes, or hands leadership away from first).
func (k Kind) OrphanAllowed() bool { return k == RemoveMember || k == MoveLeader }

// StartsMember: the action begins running a member: its Pod (BootstrapSeed, CreatePod), or its
// membership, which a Pod must then follow (AddLearner). Such actions wait for TLS material.
func (k Kind) StartsMember() bool {
	//exhaustive:enforce
	switch k {
	case BootstrapSeed, CreatePod, AddLearner:
		return true
	case Nothing, Wait, AdoptSpec, CreateMember, PromoteLearner, RecordPhase, RemoveMember, DeletePod, DeletePVC,
		ResetMember, DeleteMember, FinalizeMember, MoveLeader, RestartContainer, ResizePod, RecordTemplate,
		PatchPodMetadata, Defragment, RecordDefragmentation, Compact, DisarmAlarm, StartRecovery, RecoveryStep,
		DiscardMember, FinishRecovery, AbortRecovery, ExpandPVC, DetachMember, PrepareEviction, ScaleSource, Downgrade, StartHandOver, Authenticate:
		return false
	}
	return false
}

// Disrupts: every action of the kind takes a member, or its data, away for a while, so the plan
// sets its Disruption and the controller carries it out through the chokepoint
// (disruption.Disrupter); no action of another kind carries one. DeleteMember is not among them:
// deleting the object is only the intent of a scale-down, whose MemberRemove follows (a
// RemoveMember) through the chokepoint.
func (k Kind) Disrupts() bool {
	//exhaustive:enforce
	switch k {
	case RemoveMember, DeletePod, DeletePVC, RestartContainer, Defragment, PrepareEviction:
		return true
	case Nothing, Wait, AdoptSpec, CreateMember, BootstrapSeed, AddLearner, CreatePod, PromoteLearner, RecordPhase,
		ResetMember, DeleteMember, FinalizeMember, MoveLeader, ResizePod, RecordTemplate, PatchPodMetadata,
		RecordDefragmentation, Compact, DisarmAlarm, StartRecovery, RecoveryStep, DiscardMember, FinishRecovery,
		AbortRecovery, ExpandPVC, DetachMember, ScaleSource, Downgrade, StartHandOver, Authenticate:
		return false
	}
	return false
}

// Recovery: the kind is a quorum recovery's bookkeeping (the controller's applyRecovery).
func (k Kind) Recovery() bool {
	//exhaustive:enforce
	switch k {
	case StartRecovery, RecoveryStep, DiscardMember, FinishRecovery, AbortRecovery:
		return true
	case Nothing, Wait, AdoptSpec, CreateMember, BootstrapSeed, AddLearner, CreatePod, PromoteLearner, RecordPhase,
		RemoveMember, DeletePod, DeletePVC, ResetMember, DeleteMember, FinalizeMember, MoveLeader, RestartContainer,
		ResizePod, RecordTemplate, PatchPodMetadata, Defragment, RecordDefragmentation, Compact, DisarmAlarm, ExpandPVC,
		DetachMember, PrepareEviction, ScaleSource, Downgrade, StartHandOver, Authenticate:
		return false
	}
	return false
}
