package plan

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

const imageUnknown = "set --operator-image (or POD_NAME and POD_NAMESPACE so Steward can read its own Pod's image)"

// Without the Steward image a member Pod could only start etcd without the data check, so none is
// started (fail closed), and nothing that takes a Pod away runs either: it could not come back.
// Steps that leave Pods alone go on; the hold is the reason whenever a Pod step is held.
func TestPlanImageHold(t *testing.T) {
	hold := func(f *Facts) { f.ImageHold = imageUnknown }
	runPlanCases(t, []planCase{
		{name: "a missing Pod is not recreated", mutate: all(hold, func(f *Facts) { f.podGone("c-1") }),
			want: want{kind: Wait, reason: ReasonStewardImageUnknown, message: "CreatePod c-1 (MemberPodMissing) waits for the Steward image: set --operator-image"}},
		{name: "an outdated member is not rolled", mutate: all(hold, func(f *Facts) { f.retarget(cpu("1")) }),
			want: want{kind: Wait, reason: ReasonStewardImageUnknown, message: "waits for the Steward image"}},
		{name: "a crash-looping member is not replaced", mutate: all(hold, func(f *Facts) { f.crashing("c-2", 8, "Error") }),
			want: want{kind: Wait, reason: ReasonStewardImageUnknown}},
		{name: "a new member is not added", mutate: all(hold, func(f *Facts) { f.setReplicas(5) }),
			want: want{kind: Wait, reason: ReasonStewardImageUnknown}},
		{name: "metadata moves in place", mutate: all(hold, func(f *Facts) {
			f.retarget(func(t *stewardv1.MemberTemplate) { t.PodMetadata.Labels = map[string]string{"team": "b"} })
		}), want: want{kind: PatchPodMetadata, member: "c-0"}},
		{name: "a converged cluster says it could not rebuild a Pod", mutate: hold,
			want: want{kind: Wait, reason: ReasonStewardImageUnknown, message: "no member Pod can be started: " + imageUnknown}},
		{name: "without a hold nothing changes", mutate: func(f *Facts) { f.podGone("c-1") }, want: want{kind: CreatePod, member: "c-1"}},
	})
}

// Only the user (or the operator's own Pod) ends the hold: Progressing says so, not "in progress".
func TestPlanImageHoldCondition(t *testing.T) {
	d := planFor(t, 3, "", func(f *Facts) { f.ImageHold = imageUnknown; f.podGone("c-1") })
	c := meta.FindStatusCondition(d.Conditions, ConditionProgressing)
	if c == nil || c.Status != "False" || c.Reason != string(ReasonStewardImageUnknown) {
		t.Errorf("Progressing %+v", c)
	}
}
