// Package failpoint stops the operator at chosen points between an etcd change and the
// Kubernetes write that records it (or the other way round), so a fault campaign can kill the
// operator exactly there and check that the next one finishes the job.
//
// The points exist only in binaries built with the tag `failpoints`. Without it, WithArmed and Hit
// are empty and inline away, so release builds carry neither the code nor its imports. Even in a
// tagged build a point does nothing unless the EtcdCluster being reconciled carries the annotation
// etcd.steward.dev/failpoint naming it.
package failpoint

// A point is named for the side effect it surrounds: "before-X" stops before the call is sent,
// "after-X" stops after it succeeded but before anything else (in particular, before its result is
// written to Kubernetes).
const (
	BeforeMemberAdd     = "before-member-add"
	AfterMemberAdd      = "after-member-add"
	BeforeMemberPromote = "before-member-promote"
	AfterMemberPromote  = "after-member-promote"
	BeforeMemberRemove  = "before-member-remove"
	AfterMemberRemove   = "after-member-remove"
	BeforeMoveLeader    = "before-move-leader"
	AfterMoveLeader     = "after-move-leader"
	BeforeDefragment    = "before-defragment"
	AfterDefragment     = "after-defragment"
	BeforeCompact       = "before-compact"
	AfterCompact        = "after-compact"
	BeforeAlarmDisarm   = "before-alarm-disarm"
	AfterAlarmDisarm    = "after-alarm-disarm"
	BeforePodDelete     = "before-pod-delete"
	AfterPodDelete      = "after-pod-delete"
	// The downgrade's enable: etcd enabled it, status.downgrade does not say so yet.
	BeforeDowngradeEnable = "before-downgrade-enable"
	AfterDowngradeEnable  = "after-downgrade-enable"
)

// Points lists every point, for the campaign to pick from: a name missing here would never be
// exercised.
var Points = []string{
	BeforeMemberAdd, AfterMemberAdd,
	BeforeMemberPromote, AfterMemberPromote,
	BeforeMemberRemove, AfterMemberRemove,
	BeforeMoveLeader, AfterMoveLeader,
	BeforeDefragment, AfterDefragment,
	BeforeCompact, AfterCompact,
	BeforeAlarmDisarm, AfterAlarmDisarm,
	BeforePodDelete, AfterPodDelete,
	BeforeDowngradeEnable, AfterDowngradeEnable,
}
