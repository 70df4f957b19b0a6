package disruption

import "fmt"

// Reason is why a disruption was refused; it is stable and CamelCase so the controller can put it in
// a condition.
type Reason string

const (
	ReasonUnknownMember          Reason = "UnknownMember"
	ReasonUnknownDisruption      Reason = "UnknownDisruption"
	ReasonMemberListUnknown      Reason = "MemberListUnknown"
	ReasonOtherMemberDisrupted   Reason = "OtherMemberDisrupted"
	ReasonOtherMemberNotReady    Reason = "OtherMemberNotReady"
	ReasonLearnerPresent         Reason = "LearnerPresent"
	ReasonQuorumAtRisk           Reason = "QuorumAtRisk"
	ReasonVictimIsLeader         Reason = "VictimIsLeader"
	ReasonSingleMemberNeedsOptIn Reason = "SingleMemberNeedsOptIn"
	ReasonMemoryDataWouldBeLost  Reason = "MemoryDataWouldBeLost"
	ReasonLastMember             Reason = "LastMember"
	ReasonStillAMember           Reason = "StillAMember"
	ReasonNotDormant             Reason = "NotDormant"
	ReasonNotAMember             Reason = "NotAMember"
	ReasonNoQuorumRecovery       Reason = "NoQuorumRecovery"
	ReasonQuorumShown            Reason = "QuorumShown"
	ReasonLossNotShown           Reason = "LossNotShown"
	ReasonAlreadyTerminating     Reason = "AlreadyTerminating"
)

// Refusal is the error Check returns. Compare with errors.Is against the Err* values, or read Reason.
type Refusal struct {
	Reason  Reason
	Request Request
	// Member is the member the refusal is about: the victim, or the other member in the way.
	Member string
	Detail string
}

func (r *Refusal) Error() string {
	if r.Request.Kind == "" {
		return fmt.Sprintf("disruption refused (%s)", r.Reason)
	}
	return fmt.Sprintf("%s of %s refused (%s): %s", r.Request.Kind, r.Request.Victim, r.Reason, r.Detail)
}

// Is matches any refusal with the same reason, so errors.Is(err, disruption.ErrQuorum) works.
func (r *Refusal) Is(target error) bool {
	t, ok := target.(*Refusal)
	return ok && t.Reason == r.Reason
}

// Permanent reports whether waiting alone will not lift the refusal: the user has to change the spec
// (opt in to downtime, scale out). The planner reports these as RollingUpdate=Blocked rather than
// waiting for health. A quorum refusal is permanent because Check only reaches the quorum arithmetic
// once every other voter is healthy: the cluster is simply too small.
func (r *Refusal) Permanent() bool {
	switch r.Reason {
	case ReasonSingleMemberNeedsOptIn, ReasonMemoryDataWouldBeLost, ReasonLastMember, ReasonQuorumAtRisk:
		return true
	}
	return false
}

// Sentinels for errors.Is.
var (
	ErrUnknownVictim     = &Refusal{Reason: ReasonUnknownMember}
	ErrMemberListUnknown = &Refusal{Reason: ReasonMemberListUnknown}
	ErrOtherDisrupted    = &Refusal{Reason: ReasonOtherMemberDisrupted}
	ErrOtherNotReady     = &Refusal{Reason: ReasonOtherMemberNotReady}
	// ErrAlreadyTerminating: the fresh read shows the victim's Pod already being deleted; the
	// restart asked for is under way (a plan made on a cache that had not seen it yet).
	ErrAlreadyTerminating = &Refusal{Reason: ReasonAlreadyTerminating}
	ErrLearnerPresent     = &Refusal{Reason: ReasonLearnerPresent}
	ErrQuorum             = &Refusal{Reason: ReasonQuorumAtRisk}
	ErrLeader             = &Refusal{Reason: ReasonVictimIsLeader}
	ErrSingleMember       = &Refusal{Reason: ReasonSingleMemberNeedsOptIn}
	ErrMemoryData         = &Refusal{Reason: ReasonMemoryDataWouldBeLost}
	ErrLastMember         = &Refusal{Reason: ReasonLastMember}
	ErrStillMember        = &Refusal{Reason: ReasonStillAMember}
	ErrNotDormant         = &Refusal{Reason: ReasonNotDormant}
	ErrNotMember          = &Refusal{Reason: ReasonNotAMember}
	ErrNoRecovery         = &Refusal{Reason: ReasonNoQuorumRecovery}
	ErrQuorumShown        = &Refusal{Reason: ReasonQuorumShown}
	ErrLossNotShown       = &Refusal{Reason: ReasonLossNotShown}
)

func refuse(reason Reason, r Request, member, format string, args ...any) *Refusal {
	return &Refusal{Reason: reason, Request: r, Member: member, Detail: fmt.Sprintf(format, args...)}
}
