package plan

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// The step clock times every step in flight, whatever its kind: a PVC restart keeps the member's
// phase Running, and a scale step or a volume expansion changes no phase at all, so member phases
// alone cannot time them. The clock lives in status.lastStep, written from the decision, so a
// restarted operator times the same step from the same moment.

// nextStep is the status.lastStep this decision leaves behind. An action on another member (or a
// cluster-wide one) starts a new step; further actions on the same member continue it, so retries
// (a MoveLeader that keeps failing, a learner timed out and added again) never reset the clock. A
// wait keeps the clock of the step it waits on, or starts one when the cluster was settled; a
// settled cluster has no step.
func (v *view) nextStep(a Action) *stewardv1.StepRecord {
	prev := v.f.Cluster.Status.LastStep
	now := metav1.NewTime(v.f.Now)
	switch {
	case a.Kind == Nothing:
		return nil
	case a.Acts() && (prev == nil || a.Member == "" || prev.Member != a.Member):
		return &stewardv1.StepRecord{Action: a.String(), Member: a.Member, Since: now}
	case a.Acts():
		return &stewardv1.StepRecord{Action: a.String(), Member: a.Member, Since: prev.Since}
	case prev == nil:
		return &stewardv1.StepRecord{Action: string(Wait), Since: now}
	}
	kept := *prev
	return &kept
}

// deadlineExceeded: the step in progress began longer than progressDeadlineSeconds ago. A paused
// cluster makes no progress by the user's choice, and waiting for the user to restart clients
// before the old CA is dropped may rightly take days: neither is a stuck step.
func (v *view) deadlineExceeded(a Action, step *stewardv1.StepRecord) bool {
	if a.Kind == Nothing || a.Reason == ReasonPaused || a.Reason == ReasonWaitingForClientRestart || step == nil {
		return false
	}
	return v.f.Now.Sub(step.Since.Time) > v.f.progressDeadline()
}

// olderThan reports whether t lies more than d in the past; an unknown time never times out, so a
// controller that cannot tell waits rather than tearing down a slow learner.
func (v *view) olderThan(t time.Time, d time.Duration) bool {
	return !t.IsZero() && v.f.Now.Sub(t) > d
}
