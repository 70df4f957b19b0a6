package plan

import (
	"testing"

	"github.com/etcd-steward/steward/internal/disruption"
)

// withCRL: spec.auth asks every member to check the revocation list; no Pod does yet.
func withCRL(f *Facts) { f.CRL = true }

// servingCRL: every Pod already checks it.
func servingCRL(f *Facts) {
	f.CRL = true
	for i := range f.Members {
		f.Members[i].Pod.ServesCRL = true
	}
}

func TestPlanRevocationList(t *testing.T) {
	runPlanCases(t, []planCase{
		{name: "pvc: a Pod without the list is rebuilt with it, highest ordinal first", mutate: withCRL,
			want: want{kind: DeletePod, member: "c-2", reason: ReasonRollingMember, disruption: disruption.Restart,
				message: "onto a Pod that checks client certificates against the revocation list"}},
		{name: "memory: replaced like any roll (add-first: a member beside it)", medium: memory, mutate: withCRL,
			want: want{kind: CreateMember, member: "c-3", reason: ReasonRollingMember}},
		{name: "the leader is rolled last: the list waits for the followers", mutate: func(f *Facts) {
			servingCRL(f)
			f.m("c-1").Pod.ServesCRL = false
			f.m("c-2").Pod.ServesCRL = false
			f.lead("c-2")
		}, want: want{kind: DeletePod, member: "c-1", reason: ReasonRollingMember, disruption: disruption.Restart}},
		{name: "an image change on a Pod without the list is a rebuild, not a restart in place", mutate: func(f *Facts) {
			newImage(f)
			withCRL(f)
		}, want: want{kind: DeletePod, member: "c-2", reason: ReasonRollingMember, disruption: disruption.Restart, message: "onto the new template"}},
		{name: "the Pod runs the target template but not the list: no record-only step, a rebuild", mutate: func(f *Facts) {
			newImage(f)
			withCRL(f)
			f.m("c-2").Pod.Template.Image = f.Cluster.Status.Observed.Image
		}, want: want{kind: DeletePod, member: "c-2", reason: ReasonRollingMember, disruption: disruption.Restart}},
		{name: "every Pod serves it: nothing", mutate: servingCRL, want: want{kind: Nothing, reason: ReasonReconciled}},
		{name: "spec.auth gone: the list is taken off again", mutate: func(f *Facts) {
			servingCRL(f)
			f.CRL = false
		}, want: want{kind: DeletePod, member: "c-2", reason: ReasonRollingMember, disruption: disruption.Restart,
			message: "onto a Pod without the revocation list"}},
		{name: "a Pod on its way out is not counted behind", mutate: func(f *Facts) {
			servingCRL(f)
			f.m("c-2").Pod.ServesCRL = false
			f.m("c-2").Pod.Deleting = true
		}, want: want{kind: Wait}},
		{name: "an older Steward's Pod without the list: one rebuild for both", mutate: func(f *Facts) {
			upgraded(f)
			withCRL(f)
		}, want: want{kind: DeletePod, member: "c-2", reason: ReasonRollingMember, disruption: disruption.Restart,
			message: "onto the new template"}},
	})
}

// Turning the list on rolls every member onto a Pod that serves it, one at a time, the leader
// last, and never reports done while a Pod runs without it.
func TestSequenceRevocationList(t *testing.T) {
	for _, med := range media {
		w := formedWorld(t, 3, med)
		w.check = func(w *world) {
			if !w.crl {
				return
			}
			behind := false
			for _, m := range w.members {
				behind = behind || (m.pod != nil && m.pod.deleting == 0 && !m.pod.crl)
			}
			if c := w.last.Condition(ConditionRollingUpdate); behind && c.Status != "True" {
				w.violate("RollingUpdate %s (%s) while a Pod runs without the revocation list", c.Status, c.Reason)
			}
			if behind && w.last.UpdatedMembers == int32(len(w.members)) {
				w.violate("every member counted updated while a Pod runs without the revocation list")
			}
		}
		w.converge(map[int]func(*world){1: func(w *world) { w.crl = true }})
		w.assertConverged()
		for _, m := range w.members {
			if !m.pod.crl {
				t.Errorf("%s: %s's Pod does not serve the revocation list", mediumName(med), m.name)
			}
		}
		if len(w.touched()) == 0 {
			t.Fatalf("%s: nothing rolled", mediumName(med))
		}
		wantOrder(t, w, "c-2", "c-1", "c-0")
	}
}
