package plan

import (
	"testing"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
)

// newImage: the target moves to another image and every Pod could take it in place.
func newImage(f *Facts) {
	f.retarget(func(t *stewardv1.MemberTemplate) { t.Image = "registry.local/etcd:v3.5.32-patched" })
	for i := range f.Members {
		f.Members[i].Pod.ImageOnly = true
		f.Members[i].Pod.Template = f.Members[i].Template.DeepCopy()
	}
}

func TestPlanRestartInPlace(t *testing.T) {
	runPlanCases(t, []planCase{
		{name: "pvc: the container restarts in its Pod", mutate: newImage,
			want: want{kind: RestartContainer, member: "c-2", reason: ReasonRollingMember, disruption: disruption.RestartContainer}},
		{name: "memory: restarted in place, its data stays (no replacement)", medium: memory, mutate: newImage,
			want: want{kind: RestartContainer, member: "c-2", reason: ReasonRollingMember, disruption: disruption.RestartContainer}},
		{name: "not image-only: a rebuild", mutate: func(f *Facts) {
			newImage(f)
			f.m("c-2").Pod.ImageOnly = false
		}, want: want{kind: DeletePod, member: "c-2", reason: ReasonRollingMember, disruption: disruption.Restart}},
		{name: "the leader hands off first", mutate: func(f *Facts) {
			newImage(f)
			for _, n := range []string{"c-1", "c-2"} {
				f.m(n).Template.Image = f.Cluster.Status.Observed.Image
				f.m(n).Pod.Template = f.m(n).Template.DeepCopy()
			}
		}, want: want{kind: MoveLeader, member: "c-0", target: "c-1", reason: ReasonMovingLeader}},
		{name: "the Pod runs the target, the member record lags (operator stopped): record it", mutate: func(f *Facts) {
			newImage(f)
			f.m("c-2").Pod.Template.Image = f.Cluster.Status.Observed.Image
		}, want: want{kind: RecordTemplate, member: "c-2", reason: ReasonRollingMember}},
		{name: "a single member only with allowDowntime", n: 1, mutate: newImage, want: want{kind: Wait, reason: ReasonBlocked}},
		{name: "a single memory member with allowDowntime: in place keeps its data", n: 1, medium: memory, mutate: func(f *Facts) {
			newImage(f)
			f.Cluster.Spec.UpdateStrategy.AllowDowntime = true
		}, want: want{kind: RestartContainer, member: "c-0", reason: ReasonRollingMember, disruption: disruption.RestartContainer}},
	})
}

// An image change rolls every member in place: no member removed or replaced, memory included,
// one at a time, the leader last.
func TestSequenceImageInPlace(t *testing.T) {
	for _, med := range media {
		w := formedWorld(t, 3, med)
		before := ids(w)
		w.converge(map[int]func(*world){1: func(w *world) { w.cluster.Spec.Image = "registry.local/etcd:patched" }})
		w.assertConverged()
		var kinds []string
		for _, e := range w.touched() {
			kinds = append(kinds, string(e.kind)+":"+e.member)
		}
		if len(kinds) != 3 {
			t.Errorf("%s: touched %v, want 3 in-place restarts", mediumName(med), kinds)
		}
		for _, e := range w.touched() {
			if e.kind != RestartContainer {
				t.Errorf("%s: %s %s, want only RestartContainer", mediumName(med), e.kind, e.member)
			}
		}
		wantOrder(t, w, "c-2", "c-1", "c-0")
		if after := ids(w); after["c-0"] != before["c-0"] || after["c-1"] != before["c-1"] || after["c-2"] != before["c-2"] {
			t.Errorf("%s: member IDs changed %v -> %v", mediumName(med), before, after)
		}
	}
}
