package plan

import (
	"strings"
	"testing"

	"github.com/etcd-steward/steward/internal/disruption"
)

// upgraded is an operator upgrade: Steward now builds member Pods with revision 2, every running
// Pod was built with revision 1.
func upgraded(f *Facts) {
	f.PodRevision = 2
	for i := range f.Members {
		f.Members[i].Pod.Revision = 1
	}
}

func TestPlanPodRevision(t *testing.T) {
	runPlanCases(t, []planCase{
		{name: "pvc: a Pod built by an older Steward is rebuilt, highest ordinal first", mutate: upgraded,
			want: want{kind: DeletePod, member: "c-2", reason: ReasonRollingMember, disruption: disruption.Restart}},
		{name: "memory: replaced like any roll (add-first: a member beside it)", medium: memory, mutate: upgraded,
			want: want{kind: CreateMember, member: "c-3", reason: ReasonRollingMember}},
		{name: "an image change on an old Pod is a rebuild, not a restart in place", mutate: func(f *Facts) {
			newImage(f)
			upgraded(f)
		}, want: want{kind: DeletePod, member: "c-2", reason: ReasonRollingMember, disruption: disruption.Restart}},
		{name: "the Pod runs the target template but is old: no record-only step, a rebuild", mutate: func(f *Facts) {
			newImage(f)
			upgraded(f)
			f.m("c-2").Pod.Template.Image = f.Cluster.Status.Observed.Image
		}, want: want{kind: DeletePod, member: "c-2", reason: ReasonRollingMember, disruption: disruption.Restart}},
		{name: "Pods already at the revision: nothing", mutate: func(f *Facts) {
			upgraded(f)
			for i := range f.Members {
				f.Members[i].Pod.Revision = 2
			}
		}, want: want{kind: Nothing, reason: ReasonReconciled}},
		{name: "a Pod on its way out is not counted behind", mutate: func(f *Facts) {
			f.PodRevision = 2
			for i := range f.Members {
				f.Members[i].Pod.Revision = 2
			}
			f.m("c-2").Pod.Revision = 1
			f.m("c-2").Pod.Deleting = true
		}, want: want{kind: Wait}},
		{name: "revision check off (0): old Pods are left alone", mutate: func(f *Facts) {
			upgraded(f)
			f.PodRevision = 0
		}, want: want{kind: Nothing, reason: ReasonReconciled}},
	})
}

// An operator upgrade that changes member Pods rolls every member onto the new Pod one at a time,
// the leader last, shows it as a StewardUpgrade pass, and never reports done while a Pod is old.
func TestSequenceStewardUpgrade(t *testing.T) {
	for _, med := range media {
		w := formedWorld(t, 3, med)
		before := ids(w)
		sawPass := false
		w.check = func(w *world) {
			if w.podRevision == 0 {
				return
			}
			behind := false
			for _, m := range w.members {
				behind = behind || (m.pod != nil && m.pod.deleting == 0 && m.pod.revision < w.podRevision)
			}
			if r := w.last.Rollout; r != nil && r.Pass == PassStewardUpgrade {
				sawPass = true
			}
			c := w.last.Condition(ConditionRollingUpdate)
			if behind && c.Status != "True" {
				w.violate("RollingUpdate %s (%s) while a Pod built by an older Steward runs", c.Status, c.Reason)
			}
			if behind && w.last.UpdatedMembers == int32(len(w.members)) {
				w.violate("every member counted updated while a Pod built by an older Steward runs")
			}
		}
		w.converge(map[int]func(*world){1: func(w *world) { w.podRevision = 2 }})
		w.assertConverged()
		for _, m := range w.members {
			if m.pod.revision != 2 {
				t.Errorf("%s: %s's Pod has revision %d, want 2", mediumName(med), m.name, m.pod.revision)
			}
		}
		if !sawPass {
			t.Errorf("%s: status.rollout.pass never said %s", mediumName(med), PassStewardUpgrade)
		}
		if len(w.touched()) == 0 {
			t.Fatalf("%s: nothing rolled", mediumName(med))
		}
		wantOrder(t, w, "c-2", "c-1", "c-0")
		if med != memory {
			if after := ids(w); after["c-0"] != before["c-0"] || after["c-2"] != before["c-2"] {
				t.Errorf("pvc: member IDs changed %v -> %v (a restart keeps the member)", before, after)
			}
		}
		for _, l := range w.trace {
			if strings.Contains(l, "RestartContainer") {
				t.Errorf("%s: restarted in place, which keeps the old Pod: %s", mediumName(med), l)
			}
		}
	}
}
