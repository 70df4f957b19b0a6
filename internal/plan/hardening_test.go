package plan

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/health"
)

// Issue 10: the faults the first tests did not model. Each test names the defect it covers.

// failPod puts a member's Pod in phase Failed (a node-pressure eviction) behind the operator's back.
func failPod(name string) func(*world) {
	return func(w *world) {
		p := w.member(name).pod
		p.failed, p.running = true, false
		w.faults[name] = true
	}
}

// stall keeps a member's etcd unready for n ticks without crashing (WAL replay, a long defrag).
func stall(name string, n int) func(*world) {
	return func(w *world) {
		w.member(name).pod.stalled = n
		w.faults[name] = true
	}
}

// Defect 1: a lifetime restart count alone never gets a member replaced.
func TestCrashLoopNeedsEvidence(t *testing.T) {
	oldRestarts := func(unready time.Duration) func(*Facts) {
		return func(f *Facts) {
			p := &f.m("c-2").Pod
			p.Ready, p.RestartCount, p.LastTerminationReason = false, 6, "Error"
			p.NotReadySince, p.LastTerminatedAt = f.Now.Add(-unready), f.Now.Add(-90*24*time.Hour)
			f.silence("c-2")
		}
	}
	runPlanCases(t, []planCase{
		{name: "six old restarts, briefly unready: kept", mutate: oldRestarts(20 * time.Second),
			want: want{kind: Wait, reason: ReasonWaitingForHealth}},
		{name: "six old restarts, unready for long without crashing (a long defrag): kept",
			mutate: oldRestarts(20 * time.Minute), want: want{kind: Wait, reason: ReasonWaitingForHealth}},
		{name: "crash-looping, but its etcd answers: kept", mutate: func(f *Facts) {
			f.crashing("c-2", 9, "Error")
			f.ep("c-2").Reachable = true
		}, want: want{kind: Wait, reason: ReasonWaitingForHealth}},
		{name: "crash-looping for less than the window: not yet", mutate: func(f *Facts) {
			f.crashing("c-2", 9, "Error")
			f.m("c-2").Pod.NotReadySince = f.Now.Add(-20 * time.Second)
		}, want: want{kind: Wait, reason: ReasonWaitingForHealth}},
		{name: "crash-looping for the window, etcd silent: replaced", mutate: func(f *Facts) { f.crashing("c-2", 9, "Error") },
			want: want{kind: RemoveMember, member: "c-2", reason: ReasonMemberCrashLooping, disruption: disruption.Replace}},
		{name: "crash-looping and backing off, last exit a while ago: replaced", mutate: func(f *Facts) {
			f.crashing("c-2", 9, "Error")
			f.m("c-2").Pod.NotReadySince = f.Now.Add(-10 * time.Minute)
			f.m("c-2").Pod.LastTerminatedAt = f.Now.Add(-4 * time.Minute)
		}, want: want{kind: RemoveMember, member: "c-2", reason: ReasonMemberCrashLooping, disruption: disruption.Replace}},
		{name: "killed three times while serving, waiting out a 40 s back-off: kept", mutate: func(f *Facts) {
			f.crashing("c-2", 2, "Error")
			f.m("c-2").Pod.NotReadySince = f.Now.Add(-35 * time.Second)
			f.m("c-2").Pod.LastTerminatedAt = f.Now.Add(-35 * time.Second)
		}, want: want{kind: Wait, reason: ReasonWaitingForHealth}},
		{name: "killed while serving, then crashing on every start: replaced", mutate: func(f *Facts) {
			f.crashing("c-2", 2, "Error")
			f.m("c-2").Pod.NotReadySince = f.Now.Add(-35 * time.Second)
			f.m("c-2").Pod.LastTerminatedAt = f.Now.Add(-4 * time.Second)
		}, want: want{kind: RemoveMember, member: "c-2", reason: ReasonMemberCrashLooping, disruption: disruption.Replace}},
	})
}

// Defect 1, as a sequence: a long-lived member with six old restarts that goes unready for a while
// keeps its ID and its data.
func TestSequenceOldRestartsKeepData(t *testing.T) {
	w := formedWorld(t, 3, "")
	before := ids(w)
	w.member("c-1").pod.restarts = 6
	w.member("c-1").pod.lastTerminated = w.now.Add(-90 * 24 * time.Hour)
	w.converge(map[int]func(*world){1: stall("c-1", 12)})
	w.assertConverged()
	if ids(w)["c-1"] != before["c-1"] {
		t.Errorf("c-1 was replaced for old restarts: %v -> %v", before, ids(w))
	}
	if len(w.touched()) != 0 {
		t.Errorf("touched %s", names(w.touched()))
	}
}

// Defect 1: a member whose etcd answers is never replaced, however long its Pod is unready and
// however many restarts it has.
func TestSequenceAnswersButNotReady(t *testing.T) {
	w := formedWorld(t, 3, "")
	before := ids(w)
	w.member("c-1").pod.restarts = 9
	w.member("c-1").pod.lastTerminated = w.now
	w.liveness = false // unready until the test says so: no path back before that
	w.converge(map[int]func(*world){
		1:  func(w *world) { w.member("c-1").pod.unready = true },
		60: func(w *world) { w.member("c-1").pod.unready = false },
	})
	w.assertConverged()
	if ids(w)["c-1"] != before["c-1"] || len(w.touched()) != 0 {
		t.Errorf("a member that answers was touched: %v -> %v, %s", before, ids(w), names(w.touched()))
	}
}

// Defect 2, as a sequence: NOSPACE raised mid-roll stops the roll without taking anyone down or
// replacing anyone; once disarmed, the roll finishes.
func TestSequenceAlarmMidRoll(t *testing.T) {
	for _, med := range media {
		w := formedWorld(t, 3, med)
		var disruptedDuringAlarm []string
		w.check = func(w *world) {
			if !w.alarm {
				return
			}
			for _, e := range w.events {
				if e.step == w.step && (e.kind == DeletePod || e.kind == RemoveMember) {
					disruptedDuringAlarm = append(disruptedDuringAlarm, e.member)
				}
			}
		}
		w.liveness = false // the alarm waits for the user by design
		w.converge(map[int]func(*world){
			1:  changeResources("1"),
			6:  func(w *world) { w.alarm = true },
			50: func(w *world) { w.alarm = false },
		})
		w.assertConverged()
		if len(disruptedDuringAlarm) > 0 {
			t.Errorf("%s: disrupted %v while NOSPACE was raised", mediumName(med), disruptedDuringAlarm)
		}
	}
}

// Defect 3: a removal waiting for a healthy cluster never keeps the repair that heals it from
// running, with or without the operator dying mid-step.
func TestSequenceRemovalWaitsForRepair(t *testing.T) {
	for _, crashRate := range []float64{0, 0.3} {
		t.Run("pvc Pod lost while a scale-down waits", func(t *testing.T) {
			w := formedWorld(t, 3, "")
			w.crashRate = crashRate
			before := ids(w)
			w.converge(map[int]func(*world){1: scaleTo(2), 2: killPod("c-1")})
			w.assertConverged()
			if after := ids(w); after["c-0"] != before["c-0"] || after["c-1"] != before["c-1"] {
				t.Errorf("survivors replaced: %v -> %v", before, after)
			}
		})
		t.Run("memory Pod failed while a scale-down waits", func(t *testing.T) {
			w := formedWorld(t, 3, memory)
			w.crashRate = crashRate
			w.converge(map[int]func(*world){1: scaleTo(2), 2: failPod("c-1")})
			w.assertConverged()
		})
		t.Run("pvc Pod lost while a replacement's removal waits", func(t *testing.T) {
			w := formedWorld(t, 3, "")
			w.crashRate = crashRate
			w.converge(map[int]func(*world){
				1: func(w *world) { w.member("c-2").phase = stewardv1.MemberRemoving },
				2: killPod("c-1"),
			})
			w.assertConverged()
		})
	}
}

// Defect 4: a Failed Pod is repaired like a missing one.
func TestPlanFailedPod(t *testing.T) {
	failed := func(name string) func(*Facts) {
		return func(f *Facts) {
			f.m(name).Pod.Failed, f.m(name).Pod.Ready = true, false
			f.silence(name)
		}
	}
	runPlanCases(t, []planCase{
		{name: "pvc: delete the Failed Pod so it is recreated on its PVC", mutate: failed("c-1"),
			want: want{kind: DeletePod, member: "c-1", reason: ReasonMemberPodFailed, disruption: disruption.Restart}},
		{name: "pvc: repaired even while a removal waits", mutate: func(f *Facts) {
			f.setReplicas(2)
			f.m("c-2").Deleting = true
			failed("c-1")(f)
		}, want: want{kind: DeletePod, member: "c-1", reason: ReasonMemberPodFailed, disruption: disruption.Restart}},
		{name: "pvc Pod gone and its PVC on its way out: replace", mutate: func(f *Facts) {
			f.podGone("c-1")
			f.m("c-1").PVC.Deleting = true
		}, want: want{kind: RemoveMember, member: "c-1", reason: ReasonMemberDataLost, disruption: disruption.Replace}},
		// Two evicted at once (node pressure) leave the third without quorum: their etcd never runs
		// again in those Pods, so only deleting them brings quorum back; waiting for quorum first
		// would wait forever.
		{name: "pvc: two Failed Pods and quorum lost: delete one so it comes back on its PVC", mutate: all(
			failed("c-1"), failed("c-2"), noQuorumSeen("c-0")),
			want: want{kind: DeletePod, member: "c-1", reason: ReasonMemberPodFailed, disruption: disruption.Restart}},
		{name: "pvc: one Failed, one deleting, quorum lost: the Failed one goes too", mutate: all(
			failed("c-1"), failed("c-2"), noQuorumSeen("c-0"), func(f *Facts) { f.m("c-1").Pod.Deleting = true }),
			want: want{kind: DeletePod, member: "c-2", reason: ReasonMemberPodFailed, disruption: disruption.Restart}},
		{name: "pvc: quorum lost past Automatic's wait: the Failed Pods come back before any recovery", mutate: all(
			failed("c-1"), failed("c-2"), noQuorumSeen("c-0"), automatic(300, time.Hour)),
			want: want{kind: DeletePod, member: "c-1", reason: ReasonMemberPodFailed, disruption: disruption.Restart}},
		{name: "memory: replace the member", medium: memory, mutate: failed("c-1"),
			want: want{kind: RemoveMember, member: "c-1", reason: ReasonMemberPodFailed, disruption: disruption.Replace}},
		{name: "memory: replaced even while a scale-down's removal waits", medium: memory, mutate: func(f *Facts) {
			f.setReplicas(2)
			f.m("c-2").Deleting = true
			failed("c-1")(f)
		}, want: want{kind: RemoveMember, member: "c-1", reason: ReasonMemberPodFailed, disruption: disruption.Replace}},
	})
}

// noQuorumSeen: name's etcd answers but follows no leader, and the member list cannot be read.
func noQuorumSeen(name string) func(*Facts) {
	return func(f *Facts) {
		e := f.ep(name)
		e.Healthy, e.LeaderID, e.ReadOK = false, 0, false
		f.Etcd.MemberListErr = "context deadline exceeded"
		f.Etcd.Members = nil
	}
}

func TestSequenceFailedPod(t *testing.T) {
	t.Run("two PVC Pods evicted at once", func(t *testing.T) {
		w := formedWorld(t, 3, "")
		before := ids(w)
		w.converge(map[int]func(*world){1: func(w *world) { failPod("c-1")(w); failPod("c-2")(w) }})
		w.assertConverged()
		if after := ids(w); after["c-1"] != before["c-1"] || after["c-2"] != before["c-2"] {
			t.Errorf("evicted PVC members replaced: %v -> %v; their PVCs keep them", before, after)
		}
	})
	for _, med := range media {
		w := formedWorld(t, 3, med)
		before := ids(w)
		w.converge(map[int]func(*world){1: failPod("c-1")})
		w.assertConverged()
		kept := ids(w)["c-1"] == before["c-1"]
		if kept != (med != memory) {
			t.Errorf("%s: c-1 kept its ID = %v; a PVC member keeps it, a memory member is replaced", mediumName(med), kept)
		}
	}
}

// Defect 5: the minor-step rule reads what members run, not only what is recorded on them.
func TestVersionHoldReadsRunningVersions(t *testing.T) {
	f := healthyFacts(t, 3, "")
	f.retarget(func(t *stewardv1.MemberTemplate) { t.Version = "3.6.12" })
	for _, m := range []string{"c-0", "c-1", "c-2"} {
		f.m(m).Template.Version = "3.6.12" // recorded on every member ...
		if m != "c-2" {
			f.m(m).Pod.Template.Version, f.ep(m).Version = "3.6.12", "3.6.12"
			// The storage version etcd 3.6 reports once the cluster runs 3.6, here ahead of c-2's
			// so that only what c-2 runs holds the edit (the data's own word: dataversion_test.go).
			f.ep(m).StorageVersion = "3.6.0"
		}
	}
	f.Cluster.Spec.Version = "3.7.0" // ... while c-2 still runs 3.5 (its Pod was seen late)
	d := Plan(f)
	if d.Action.Kind == AdoptSpec || !strings.Contains(d.AdoptionRefused, "c-2") {
		t.Fatalf("adopted 3.7.0 while c-2 runs 3.5.32: %s; refused: %q", d.Action, d.AdoptionRefused)
	}
	f.m("c-2").Pod.Template.Version = "3.6.12" // the Pod is current, but etcd still reports 3.5
	if d := Plan(f); d.Action.Kind == AdoptSpec || !strings.Contains(d.AdoptionRefused, "runs 3.5.32") {
		t.Fatalf("adopted 3.7.0 while c-2's etcd reports 3.5.32: %s", d.Action)
	}
	f.ep("c-2").Version, f.ep("c-2").StorageVersion = "3.6.12", "3.6.0"
	if d := Plan(f); d.Action.Kind != AdoptSpec {
		t.Fatalf("every member runs 3.6: 3.7.0 must be adopted, got %s (%s)", d.Action, d.AdoptionRefused)
	}
}

// Defect 6: every step in flight is timed, not only those that change a member's phase.
func TestSequenceProgressDeadlineTimesEveryStep(t *testing.T) {
	exceeded := func(t *testing.T, w *world, hooks map[int]func(*world)) {
		t.Helper()
		w.liveness = false // the steps are stuck on purpose
		seen := false
		w.check = func(w *world) { seen = seen || w.last.DeadlineExceeded }
		w.run(90, hooks)
		if len(w.errs) > 0 {
			t.Fatalf("violations: %v\n%s", w.errs, w.tail(20))
		}
		if !seen {
			t.Errorf("a step stuck for 15 minutes never exceeded the 600s deadline\n%s", w.tail(12))
		}
	}
	t.Run("pvc roll: the restarted member never comes back", func(t *testing.T) {
		w := formedWorld(t, 3, "")
		exceeded(t, w, map[int]func(*world){1: both(changeResources("1"), func(w *world) { w.unschedulable["c-2"] = true })})
	})
	t.Run("scale step: the new member cannot be scheduled", func(t *testing.T) {
		w := formedWorld(t, 3, "")
		w.unschedulable["c-3"] = true
		exceeded(t, w, map[int]func(*world){1: scaleTo(4)})
	})
	t.Run("expansion: the volume does not grow", func(t *testing.T) {
		w := formedWorld(t, 3, "")
		w.growPaused = true
		exceeded(t, w, map[int]func(*world){1: func(w *world) { w.cluster.Spec.Storage.Size = quantity("8Gi") }})
	})
	t.Run("a settled cluster has no step and no deadline", func(t *testing.T) {
		w := formedWorld(t, 3, "")
		w.run(90, nil)
		if w.last.DeadlineExceeded || w.cluster.Status.LastStep != nil {
			t.Errorf("settled: deadline %v, lastStep %+v", w.last.DeadlineExceeded, w.cluster.Status.LastStep)
		}
	})
}

// Defect 7: updated means the running Pod carries the target and the volume has its size.
func TestUpdatedMeansRunning(t *testing.T) {
	f := healthyFacts(t, 3, "")
	f.retarget(cpu("1"))
	cpu("1")(&f.m("c-2").Template) // recorded, but the Pod still runs the old template
	d := Plan(f)
	if d.UpdatedMembers != 0 || d.Members[2].Updated {
		t.Errorf("a template recorded before its Pod runs it counts as updated: %d, %+v", d.UpdatedMembers, d.Members[2])
	}
	g := healthyFacts(t, 3, "")
	size := resource.MustParse("8Gi")
	g.retarget(func(t *stewardv1.MemberTemplate) { t.Storage.Size = &size })
	for _, m := range []string{"c-0", "c-1", "c-2"} {
		g.m(m).Template.Storage.Size = &size
		g.m(m).PVC.Requested = size // every ExpandPVC done; the volumes have not grown yet
	}
	d = Plan(g)
	if c := d.Condition(ConditionRollingUpdate); c.Status != "True" || d.UpdatedMembers != 0 {
		t.Errorf("capacity still growing: RollingUpdate %s %s, updated %d", c.Status, c.Reason, d.UpdatedMembers)
	}
}

// Risks closed: a Pod stuck terminating is named with the command a human runs; a Failed seed is
// rebuilt; etcd answering as another cluster or member holds everything.
func TestPlanHardeningRisks(t *testing.T) {
	terminating := func(ago time.Duration) func(*Facts) {
		return func(f *Facts) {
			p := &f.m("c-1").Pod
			p.Deleting, p.Ready, p.DeletingSince = true, false, f.Now.Add(-ago)
			f.silence("c-1")
		}
	}
	runPlanCases(t, []planCase{
		{name: "Pod terminating briefly: wait", mutate: terminating(time.Minute),
			want: want{kind: Wait, reason: ReasonWaitingForPodDeletion}},
		{name: "Pod stuck terminating: say so, with the command, never force", mutate: terminating(20 * time.Minute),
			want: want{kind: Wait, reason: ReasonPodStuckTerminating, message: "kubectl delete pod c-1 -n ns --grace-period=0 --force"}},
		{name: "a Failed seed is rebuilt", mutate: func(f *Facts) {
			f.Members, f.Etcd = nil, health.Facts{MemberListErr: "connection refused"}
			f.Cluster.Status.ClusterID = ""
			f.newMember(0, stewardv1.MemberPending).Pod = Pod{Exists: true, Failed: true}
		}, want: want{kind: DeletePod, member: "c-0", reason: ReasonMemberPodFailed, disruption: disruption.Restart}},
		{name: "the member list comes from another cluster: hold", mutate: func(f *Facts) {
			f.EtcdClusterID = "beef"
			f.podGone("c-1")
		}, want: want{kind: Wait, reason: ReasonClusterIdentityMismatch, message: "beef"}},
		{name: "an endpoint answers as another cluster: hold", mutate: func(f *Facts) {
			f.ep("c-2").ClusterID = 0xbeef
			f.podGone("c-1")
		}, want: want{kind: Wait, reason: ReasonClusterIdentityMismatch, message: "c-2"}},
		{name: "an endpoint answers as another member: hold", mutate: func(f *Facts) {
			f.ep("c-2").MemberID = 0x777
			f.crashing("c-1", 9, "Error")
		}, want: want{kind: Wait, reason: ReasonClusterIdentityMismatch, message: "777"}},
	})
	d := planFor(t, 3, "", terminating(20*time.Minute))
	if c := d.Condition(ConditionDegraded); c.Reason != string(ReasonPodStuckTerminating) {
		t.Errorf("Degraded = %+v", c)
	}
	if c := d.Condition(ConditionProgressing); c.Status != "False" {
		t.Errorf("a Pod stuck on a lost node is not progress: %+v", c)
	}
}

// A member whose etcd refused its data directory (empty, or another member's) is replaced, never
// restarted on it (issue 12, item 6).
func TestPlanDataCheckFailed(t *testing.T) {
	d := planFor(t, 3, "", func(f *Facts) {
		f.m("c-2").Pod.DataLost = "Empty: /var/lib/etcd/data holds no etcd member"
		f.m("c-2").Pod.Ready = false
		f.silence("c-2")
	})
	checkAction(t, d, want{kind: RemoveMember, member: "c-2", reason: ReasonMemberDataLost, disruption: disruption.Replace,
		message: "its data directory fails the check (Empty"})
	d = planFor(t, 3, "", func(f *Facts) {
		f.m("c-0").Pod.DataLost = "Foreign: holds member 2's data, not 1's"
		f.m("c-0").Pod.Ready = false
	})
	checkAction(t, d, want{kind: MoveLeader, member: "c-0", target: "c-1", reason: ReasonMovingLeader})
}
