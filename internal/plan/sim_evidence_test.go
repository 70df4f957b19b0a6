package plan

// Simulator sequences for issue 23's findings 3, 7, 8 and 9: multi-step runs through the planner
// with the world's own checks (sim_evidence_world_test.go) at every step.

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// evidenceWorldOf is a formed cluster whose kubelet reports container state, IDs and generations.
func evidenceWorldOf(t *testing.T, n int32, medium stewardv1.StorageMedium) *world {
	t.Helper()
	w := newWorld(t, n, medium)
	w.ev.kubelet, w.ev.observer, w.liveness = true, "op-1", false
	w.converge(nil)
	w.assertConverged()
	w.events = nil
	return w
}

// stepEvents are the events the current step produced.
func (w *world) stepEvents() []event {
	var out []event
	for _, e := range w.events {
		if e.step == w.step {
			out = append(out, e)
		}
	}
	return out
}

func automaticAfter(after int32) func(*world) {
	return func(w *world) {
		w.cluster.Spec.QuorumLoss = &stewardv1.QuorumLossSpec{Policy: stewardv1.QuorumLossAutomatic, AfterSeconds: ptrTo(after)}
	}
}

func annotateRecover(value string) func(*world) {
	return func(w *world) {
		if w.cluster.Annotations == nil {
			w.cluster.Annotations = map[string]string{}
		}
		w.cluster.Annotations[stewardv1.AnnotationRecoverQuorum] = value
	}
}

// heal stops a member's etcd from crashing: it starts on its data at the next tick.
func healMember(w *world, name string) {
	if p := w.member(name).pod; p != nil {
		p.crashing, p.oom = false, false
	}
}

// Finding 3: a started recovery looks again before every destructive stage. Quorum is lost (two
// members' etcd containers down, the kubelets of Ready nodes say so; the third answers without a
// leader), a recovery starts, and before the survivor is forced into a new cluster a member comes
// back and answers with a leader: the recovery ends Aborted, nobody is fenced after that, nothing
// is discarded, and the cluster converges on its own members.
func TestSequenceRecoveryAbortsWhenQuorumReturns(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trigger func(*world)
		// returns is the member that comes back, and after which event it does.
		returns string
		after   Kind
	}{
		{"Automatic, back before fencing", automaticAfter(30), "c-1", StartRecovery},
		{"annotation, back before fencing", annotateRecover("auto"), "c-1", StartRecovery},
		{"Automatic, back after the first fence", automaticAfter(30), "c-2", DeletePod},
		{"annotation, back after the first fence", annotateRecover("auto"), "c-2", DeletePod},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := evidenceWorldOf(t, 3, "")
			before := ids(w)
			started, healed, aborted := 0, 0, 0
			var fenced []string
			w.check = func(w *world) {
				for _, e := range w.stepEvents() {
					switch {
					case e.kind == StartRecovery:
						started = e.step
					case e.kind == AbortRecovery:
						aborted = e.step
					case e.kind == DeletePod && e.reason == ReasonFencingMember:
						fenced = append(fenced, e.member)
						if healed != 0 {
							w.violate("fenced %s after %s came back (step %d)", e.member, tc.returns, healed)
						}
					case e.kind == DiscardMember || e.kind == CreatePod && e.reason == ReasonRecoveringQuorum:
						w.violate("%s %s: the recovery went past its point of return", e.kind, e.member)
					}
					if e.kind == tc.after && healed == 0 && started != 0 {
						healMember(w, tc.returns)
						healed = w.step
					}
				}
			}
			w.converge(map[int]func(*world){1: both(tc.trigger, crashLoop("c-1", false), crashLoop("c-2", false))})
			w.assertConverged()
			if started == 0 || healed == 0 || aborted <= healed {
				t.Fatalf("started %d, %s back at %d, aborted %d: want a recovery started, then aborted\n%s",
					started, tc.returns, healed, aborted, w.tail(40))
			}
			qr := w.cluster.Status.QuorumRecovery
			if qr == nil || qr.Last == nil || qr.Last.Outcome != stewardv1.RecoveryAborted || qr.InProgress != nil {
				t.Errorf("status.quorumRecovery = %+v, want last Aborted and nothing in progress", qr)
			} else if !strings.Contains(qr.Last.Message, "etcd shows quorum") {
				t.Errorf("the abort does not give its evidence: %q", qr.Last.Message)
			}
			if _, ok := w.cluster.Annotations[stewardv1.AnnotationRecoverQuorum]; ok {
				t.Errorf("the recover-quorum annotation outlived the aborted recovery")
			}
			wantFenced := map[Kind]int{StartRecovery: 0, DeletePod: 1}[tc.after]
			if len(fenced) != wantFenced {
				t.Errorf("fenced %v; want %d", fenced, wantFenced)
			}
			if after := ids(w); after["c-0"] != before["c-0"] || after[tc.returns] != before[tc.returns] {
				t.Errorf("members replaced: %v -> %v", before, after)
			}
		})
	}
}

// Finding 3: the Automatic clock counts only what the running operator saw. Quorum is lost under
// operator op-1, which restarts (op-2) before afterSeconds; status still carries a lostSince, once
// op-1's and once from an hour ago: op-2 starts no recovery before it has itself seen the loss for
// afterSeconds, and then it does.
func TestSequenceAutomaticClockRestartsWithTheOperator(t *testing.T) {
	const after = 60 * time.Second
	for _, old := range []string{"op-1's record", "a record an hour old"} {
		t.Run(old, func(t *testing.T) {
			w := evidenceWorldOf(t, 3, "")
			var restartAt time.Time
			started := 0
			w.check = func(w *world) {
				if w.ev.observer == "op-2" && restartAt.IsZero() {
					restartAt = w.now // op-2's first reconcile
				}
				for _, e := range w.stepEvents() {
					if e.kind != StartRecovery {
						continue
					}
					started = e.step
					switch {
					case restartAt.IsZero():
						w.violate("recovery started before the operator restarted (the test needs the restart first)")
					case w.now.Sub(restartAt) < after:
						w.violate("recovery started %s after the operator restarted, before afterSeconds (%s) of its own observation",
							w.now.Sub(restartAt), after)
					}
				}
			}
			w.stop = func(*world) bool { return started != 0 }
			restart := func(w *world) {
				w.ev.observer = "op-2"
				if qr := w.cluster.Status.QuorumRecovery; qr != nil && old != "op-1's record" {
					qr.LostSince, qr.Observer = ptrTo(metav1.NewTime(w.now.Add(-time.Hour))), "op-0"
				}
			}
			w.run(40, map[int]func(*world){1: both(automaticAfter(int32(after/time.Second)), crashLoop("c-1", false),
				crashLoop("c-2", false)), 4: restart})
			if len(w.errs) > 0 || started == 0 {
				t.Fatalf("started at step %d; violations:\n  %s\n%s", started, strings.Join(w.errs, "\n  "), w.tail(30))
			}
			if qr := w.cluster.Status.QuorumRecovery; qr == nil || qr.InProgress == nil || qr.InProgress.Trigger != TriggerAutomatic {
				t.Errorf("status.quorumRecovery = %+v, want an Automatic recovery in progress", qr)
			}
		})
	}
}

// Finding 7: a defragmentation record left by an operator that died mid-call, on a member whose
// etcd then crash-loops: the record is closed as Interrupted, and the member is repaired.
func TestSequenceDefragRecordDoesNotBlockRepair(t *testing.T) {
	for _, med := range media {
		t.Run(mediumName(med), func(t *testing.T) {
			w := evidenceWorldOf(t, 3, med)
			before := ids(w)
			record := func(w *world) {
				w.member("c-1").ev.defrag = &stewardv1.MemberDefragmentation{StartedAt: ptrTo(metav1.NewTime(w.now))}
			}
			w.converge(map[int]func(*world){1: both(record, crashLoop("c-1", false))})
			w.assertConverged()
			closed, repaired := 0, 0
			for _, e := range w.events {
				switch {
				case e.kind == RecordDefragmentation && e.member == "c-1" && e.reason == ReasonDefragmentationInterrupted:
					closed = e.step
				case e.member == "c-1" && e.reason == ReasonMemberCrashLooping && repaired == 0:
					repaired = e.step
				}
			}
			if closed == 0 || repaired <= closed {
				t.Errorf("record closed at step %d, c-1 repaired at step %d: want closed, then repaired\n%s", closed, repaired, w.tail(30))
			}
			if m := w.member("c-1"); m != nil && m.ev.defrag != nil && m.ev.defrag.StartedAt != nil {
				t.Errorf("c-1 still carries an open defragmentation record")
			}
			if ids(w)["c-1"] == before["c-1"] {
				t.Errorf("c-1 was not replaced")
			}
		})
	}
}

// Finding 8: a roll 3.5 → 3.6 edited to 3.7 while a member's Pod is being rebuilt (at each
// member's turn, the last one's included; the new Pod slow to start): no Pod is ever built, or restarted, on an etcd more than
// one minor above the member's recorded data version, and the roll ends on 3.7 for every member
// through 3.6.
func TestSequenceVersionEditWhileRebuilding(t *testing.T) {
	for turn := 1; turn <= 3; turn++ {
		t.Run(fmt.Sprintf("edited at rebuild %d", turn), func(t *testing.T) {
			w := evidenceWorldOf(t, 3, "")
			rebuilt, edited, slow := 0, false, ""
			w.check = func(w *world) {
				for _, e := range w.stepEvents() {
					m := w.member(e.member)
					switch {
					case e.kind == DeletePod && e.reason == ReasonRollingMember:
						if rebuilt++; rebuilt == turn && !edited {
							w.cluster.Spec.Version, edited, slow = "3.7.3", true, e.member
						}
					case (e.kind == CreatePod || e.kind == RestartContainer) && m != nil && m.pod != nil:
						checkDataVersion(w, m)
						if e.member == slow {
							// The new Pod takes a while to start: between the old Pod and a running
							// new one, only the member's data version says what its data is.
							m.pod.stalled, slow = 4, ""
						}
					}
				}
			}
			w.converge(map[int]func(*world){1: setVersion("3.6.16")})
			w.assertConverged()
			if !edited {
				t.Fatalf("the second edit never happened (%d rebuilds)", rebuilt)
			}
			for _, m := range w.members {
				got := w.ev.versions[m.name]
				i, j := slices.Index(got, "3.6.16"), slices.Index(got, "3.7.3")
				if m.pod.template.Version != "3.7.3" || i < 0 || j < i {
					t.Errorf("%s started %v; want 3.6.16 then 3.7.3", m.name, got)
				}
			}
		})
	}
}

// checkDataVersion: the Pod just built or restarted for m runs an etcd its recorded data version
// lets start (at most one minor newer than the server that last wrote it, not older than its
// storage version; no storage version reads as 3.5).
func checkDataVersion(w *world, m *wMember) {
	dv, run := m.ev.dataVersion, m.pod.template.Version
	if dv == nil {
		return
	}
	r, _ := parseVersion(run)
	s, _ := parseVersion(dv.Server)
	storage := dv.Storage
	if storage == "" {
		storage = "3.5"
	}
	if strings.Count(storage, ".") == 1 {
		storage += ".0"
	}
	st, _ := parseVersion(storage)
	if r[1] > s[1]+1 || r[1] > st[1]+1 || r[1] < st[1] {
		w.violate("built etcd %s for %s, whose data was last written by %s (storage version %q)", run, m.name, dv.Server, dv.Storage)
	}
}

// Finding 9: in-place restarts with a kubelet that lags (the Pod stays Ready for the old
// container a few ticks after the restart, then turns not Ready while the new container's probe
// runs): the next member is never restarted, nor made leader, before the restarted member's Pod
// is Ready for its new container, and never are two members unready at once.
func TestSequenceInPlaceRestartWaitsForTheKubelet(t *testing.T) {
	for _, lag := range []int{1, 3} {
		t.Run(fmt.Sprintf("kubelet %d ticks behind", lag), func(t *testing.T) {
			w := evidenceWorldOf(t, 3, "")
			w.ev.kubeletLag = lag
			w.check = func(w *world) {
				var out []string
				for _, m := range w.members {
					if e := w.entry(m); m.pod == nil || !trueReady(m.pod) || e == nil || !w.available(e) {
						out = append(out, m.name)
					}
				}
				if len(out) > 1 {
					w.violate("%d members unready at once: %v", len(out), out)
				}
			}
			w.converge(map[int]func(*world){1: func(w *world) { w.cluster.Spec.Image = "registry.local/etcd:v3.5.32-patched" }})
			w.assertConverged()
			var restarted []string
			for _, e := range w.events {
				switch e.kind {
				case RestartContainer:
					restarted = append(restarted, e.member)
				case DeletePod, RemoveMember:
					t.Errorf("%s %s: an image-only change is done in place", e.kind, e.member)
				}
			}
			if len(restarted) != 3 {
				t.Errorf("restarted in place: %v; want every member", restarted)
			}
		})
	}
}
