package plan

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// stuck runs a scenario that must end waiting (not Nothing) with the given reason, cleanly.
// These states wait for the user by design, so there is no path back without them: no liveness.
func (w *world) stuck(steps int, hooks map[int]func(*world), reason Reason) Decision {
	w.t.Helper()
	live := w.liveness
	w.liveness = false
	d := w.run(steps, hooks)
	w.liveness = live
	if len(w.errs) > 0 {
		w.t.Fatalf("violations:\n  %s\n%s", strings.Join(w.errs, "\n  "), w.tail(30))
	}
	if d.Action.Kind != Wait || d.Action.Reason != reason {
		w.t.Fatalf("ended with %s (%s), want Wait %s\n%s", d.Action, d.Action.Message, reason, w.tail(30))
	}
	return d
}

func (w *world) touched() []event {
	var out []event
	for _, e := range w.events {
		switch e.kind {
		case DeletePod, RemoveMember, CreatePod, DeleteMember, AddLearner, RestartContainer:
			out = append(out, e)
		}
	}
	return out
}

func TestSequenceSingleMember(t *testing.T) {
	t.Run("pvc without opt-in is blocked and untouched", func(t *testing.T) {
		w := formedWorld(t, 1, "")
		d := w.stuck(40, map[int]func(*world){1: changeResources("1")}, ReasonBlocked)
		if len(w.touched()) != 0 {
			t.Errorf("touched: %s", names(w.touched()))
		}
		if c := d.Condition(ConditionRollingUpdate); c.Reason != string(ReasonBlocked) || !strings.Contains(c.Message, "allowDowntime") {
			t.Errorf("RollingUpdate = %+v", c)
		}
	})
	t.Run("pvc with allowDowntime restarts the only member", func(t *testing.T) {
		w := formedWorld(t, 1, "")
		before := ids(w)
		w.converge(map[int]func(*world){1: both(changeResources("1"), func(w *world) {
			w.cluster.Spec.UpdateStrategy.AllowDowntime = true
		})})
		w.assertConverged()
		if got := rolled(w); len(got) != 1 || got[0] != "c-0" {
			t.Errorf("rolled %v", got)
		}
		if ids(w)["c-0"] != before["c-0"] {
			t.Errorf("a PVC restart must keep the member ID")
		}
	})
	t.Run("memory is never rolled, even with allowDowntime", func(t *testing.T) {
		w := formedWorld(t, 1, memory)
		d := w.stuck(40, map[int]func(*world){1: both(changeResources("1"), func(w *world) {
			w.cluster.Spec.UpdateStrategy.AllowDowntime = true
		})}, ReasonBlocked)
		if len(w.touched()) != 0 || !strings.Contains(d.Action.Message, "memory") {
			t.Errorf("touched %s; message %q", names(w.touched()), d.Action.Message)
		}
	})
	t.Run("memory escapes by scaling out: grow to 3, then roll", func(t *testing.T) {
		w := formedWorld(t, 1, memory)
		w.liveness = false // blocked on the user by design until step 5
		w.converge(map[int]func(*world){1: changeResources("1"), 5: scaleTo(3)})
		w.assertConverged()
		wantOrder(t, w, "c-0")
	})
	t.Run("two members cannot lose one: blocked until scaled to 3", func(t *testing.T) {
		for _, med := range media {
			w := formedWorld(t, 2, med)
			if med == memory {
				w.cluster.Spec.UpdateStrategy.MaxSurge = ptrTo[int32](0) // add-first rolls them (TestSequenceMemoryAddFirst)
			}
			w.stuck(40, map[int]func(*world){1: changeResources("1")}, ReasonBlocked)
			w.converge(map[int]func(*world){1: scaleTo(3)})
			w.assertConverged()
		}
	})
}

func TestSequenceOnDelete(t *testing.T) {
	for _, med := range media {
		t.Run(mediumName(med), func(t *testing.T) {
			w := formedWorld(t, 3, med)
			w.cluster.Spec.UpdateStrategy.Type = stewardv1.OnDelete
			d := w.run(60, map[int]func(*world){1: changeResources("1")})
			if d.Action.Kind != Nothing || len(w.touched()) != 0 {
				t.Fatalf("OnDelete touched %s; ended with %s\n%s", names(w.touched()), d.Action, w.tail(20))
			}
			if c := d.Condition(ConditionRollingUpdate); c.Reason != string(ReasonWaitingForDeletion) || c.Status != "True" {
				t.Errorf("RollingUpdate = %+v", c)
			}
			if len(d.Outdated) != 3 || d.UpdatedMembers != 0 {
				t.Errorf("outdated %v, updated %d", d.Outdated, d.UpdatedMembers)
			}
			// The user deletes one Pod: only that member is rebuilt, on the new template.
			d = w.run(60, map[int]func(*world){1: killPod("c-1")})
			if len(w.errs) > 0 || d.Action.Kind != Nothing {
				t.Fatalf("%v %s\n%s", w.errs, d.Action, w.tail(30))
			}
			if got := d.Outdated; strings.Join(got, ",") != "c-0,c-2" {
				t.Errorf("outdated after deleting c-1's Pod: %v", got)
			}
			for _, e := range w.touched() {
				if e.member != "c-1" {
					t.Errorf("touched %s", e.member)
				}
			}
		})
	}
}

func TestSequencePodMetadataInPlace(t *testing.T) {
	for _, med := range media {
		w := formedWorld(t, 3, med)
		w.converge(map[int]func(*world){1: func(w *world) {
			w.cluster.Spec.PodMetadata.Labels = map[string]string{"team": "storage"}
		}})
		w.assertConverged()
		if len(w.touched()) != 0 {
			t.Errorf("%s: a label change disrupted: %s", mediumName(med), names(w.touched()))
		}
		for _, m := range w.members {
			if m.pod.template.PodMetadata.Labels["team"] != "storage" {
				t.Errorf("%s's Pod was not patched", m.name)
			}
		}
	}
}

func TestSequenceDormant(t *testing.T) {
	w := formedWorld(t, 3, "")
	before := ids(w)
	d := w.run(60, map[int]func(*world){1: scaleTo(0)})
	if d.Action.Kind != Nothing || d.Action.Reason != ReasonDormant || len(w.errs) > 0 {
		t.Fatalf("going dormant ended with %s %v\n%s", d.Action, w.errs, w.tail(20))
	}
	w.assertConverged()
	if c := d.Condition(ConditionAvailable); c.Status != "False" || c.Reason != string(ReasonDormant) {
		t.Errorf("Available = %+v", c)
	}
	if len(w.members) != 3 {
		t.Fatalf("dormant must keep the members")
	}
	w.converge(map[int]func(*world){1: resume(3)})
	w.assertConverged()
	if got := ids(w); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Errorf("members changed across dormancy: %v -> %v", before, got)
	}
}

func TestSequenceMemoryRefusesZero(t *testing.T) {
	w := formedWorld(t, 3, memory)
	w.stuck(20, map[int]func(*world){1: scaleTo(0)}, ReasonBlocked)
	if len(w.touched()) != 0 {
		t.Errorf("touched %s", names(w.touched()))
	}
}

func TestSequenceQuorumLoss(t *testing.T) {
	t.Run("pvc: Pods come back with their data", func(t *testing.T) {
		w := formedWorld(t, 3, "")
		before := ids(w)
		w.converge(map[int]func(*world){1: both(killPod("c-0"), killPod("c-1"))})
		w.assertConverged()
		if fmt.Sprint(ids(w)) != fmt.Sprint(before) {
			t.Errorf("members replaced while quorum was lost")
		}
	})
	t.Run("memory: no membership change, a clear reason", func(t *testing.T) {
		w := formedWorld(t, 3, memory)
		d := w.stuck(30, map[int]func(*world){1: both(killPod("c-0"), killPod("c-1"))}, ReasonQuorumLost)
		for _, e := range w.events {
			if e.kind == RemoveMember || e.kind == AddLearner {
				t.Errorf("membership changed without quorum: %s", e.kind)
			}
		}
		if c := d.Condition(ConditionAvailable); c.Status != "False" || c.Reason != string(ReasonQuorumLost) {
			t.Errorf("Available = %+v", c)
		}
	})
}

func TestSequenceOOMKilled(t *testing.T) {
	w := formedWorld(t, 3, "")
	d := w.stuck(60, map[int]func(*world){1: crashLoop("c-1", true)}, ReasonWaitingForHealth)
	if len(w.touched()) != 0 {
		t.Errorf("an OOM-killed member must not be replaced: %s", names(w.touched()))
	}
	if c := d.Condition(ConditionDegraded); c.Reason != string(ReasonMemberOOMKilled) || !strings.Contains(c.Message, "c-1") {
		t.Errorf("Degraded = %+v", c)
	}
	// The user raises the limit: the OOM-killed member is rolled first.
	w.converge(map[int]func(*world){1: changeResources("2")})
	w.assertConverged()
	wantOrder(t, w, "c-1", "c-2", "c-0")
}

func TestSequenceCrashLoopReplaced(t *testing.T) {
	for _, med := range media {
		w := formedWorld(t, 3, med)
		before := ids(w)
		w.converge(map[int]func(*world){1: crashLoop("c-2", false)})
		w.assertConverged()
		after := ids(w)
		if after["c-2"] == before["c-2"] || after["c-0"] != before["c-0"] || after["c-1"] != before["c-1"] {
			t.Errorf("%s: want only c-2 replaced: %v -> %v", mediumName(med), before, after)
		}
	}
}

// TestSequenceVersionSteps: a second version edit while the first is rolling waits until every
// member runs the first; the target never skips a minor for any member.
func TestSequenceVersionSteps(t *testing.T) {
	for _, med := range media {
		w := formedWorld(t, 3, med)
		refused := false
		w.check = func(w *world) {
			refused = refused || strings.Contains(w.last.AdoptionRefused, "3.7.0")
			for _, m := range w.members {
				if s := ClassifyVersion(m.template.Version, w.cluster.Status.Observed.Version); !s.Allowed() {
					w.violate("target %s while %s runs %s (%s)", w.cluster.Status.Observed.Version, m.name, m.template.Version, s)
				}
			}
		}
		w.converge(map[int]func(*world){1: setVersion("3.6.12"), 3: setVersion("3.7.0")})
		w.assertConverged()
		if !refused {
			t.Errorf("%s: 3.7.0 was never refused while members ran 3.5", mediumName(med))
		}
	}
}

func TestSequenceStorageExpansion(t *testing.T) {
	grow := func(w *world) { w.cluster.Spec.Storage.Size = quantity("8Gi") }
	t.Run("in place, one at a time, no disruption", func(t *testing.T) {
		w := formedWorld(t, 3, "")
		w.check = func(w *world) {
			growing := 0
			for _, m := range w.members {
				if m.pvc.capacity.Cmp(m.pvc.requested) < 0 {
					growing++
				}
			}
			if growing > 1 {
				w.violate("%d PVCs growing at once", growing)
			}
		}
		w.growPaused = true
		d := w.run(3, map[int]func(*world){1: grow})
		if d.Action.Kind != Wait || d.Action.Reason != ReasonExpandingStorage {
			t.Fatalf("after one expansion: %s", d.Action)
		}
		w.growPaused = false
		w.converge(nil)
		w.assertConverged()
		if len(w.touched()) != 0 {
			t.Errorf("expansion disrupted: %s", names(w.touched()))
		}
	})
	t.Run("StorageClass without expansion: reported, nothing touched", func(t *testing.T) {
		w := formedWorld(t, 3, "")
		w.resizable = false
		w.stuck(20, map[int]func(*world){1: grow}, ReasonStorageNotExpandable)
		if len(w.touched()) != 0 {
			t.Errorf("touched %s", names(w.touched()))
		}
	})
}

func TestSequenceStuckLearner(t *testing.T) {
	w := formedWorld(t, 3, "")
	w.unschedulable["c-3"] = true
	w.converge(map[int]func(*world){1: scaleTo(4), 150: func(w *world) { w.unschedulable["c-3"] = false }})
	w.assertConverged()
	stuck := 0
	for _, e := range w.events {
		if e.reason == ReasonLearnerStuck {
			stuck++
		}
	}
	if stuck == 0 {
		t.Errorf("the unschedulable learner was never given up on")
	}
}

func TestSequenceOrphanRemoved(t *testing.T) {
	w := formedWorld(t, 3, "")
	w.converge(map[int]func(*world){1: func(w *world) {
		w.nextID++
		w.etcd = append(w.etcd, &wEtcd{id: w.nextID, peerURL: "http://stray:2380", name: "stray", learner: true})
	}})
	w.assertConverged()
}

// TestSequenceOperatorCrashes re-runs rollouts and scalings with the operator dying mid-step (after
// writing its intent, or after the etcd call but before recording it) on many seeds.
func TestSequenceOperatorCrashes(t *testing.T) {
	scenarios := map[string]map[int]func(*world){
		"roll":           {1: changeResources("100m")},
		"scale up":       {1: scaleTo(5)},
		"scale down":     {1: scaleTo(1)},
		"roll and scale": {1: both(changeResources("100m"), scaleTo(5))},
	}
	for name, hooks := range scenarios {
		for _, med := range media {
			crashes := 0
			for seed := int64(1); seed <= 15; seed++ {
				t.Run(fmt.Sprintf("%s/%s/%d", name, mediumName(med), seed), func(t *testing.T) {
					w := formedWorld(t, 3, med)
					w.rng.Seed(seed)
					w.crashRate = 0.3
					w.converge(hooks)
					w.assertConverged()
					crashes += w.crashes
				})
			}
			if crashes == 0 {
				t.Errorf("%s/%s: no step ever crashed half-way: the crash injection is not exercised", name, mediumName(med))
			}
		}
	}
}

func TestSequenceStatusDuringRoll(t *testing.T) {
	w := formedWorld(t, 3, "")
	var reasons []string
	w.check = func(w *world) {
		c := meta.FindStatusCondition(w.cluster.Status.Conditions, ConditionRollingUpdate)
		if c != nil && (len(reasons) == 0 || reasons[len(reasons)-1] != c.Reason) {
			reasons = append(reasons, c.Reason)
		}
	}
	w.converge(map[int]func(*world){1: changeResources("100m")})
	got := strings.Join(reasons, ",")
	for _, want := range []Reason{ReasonRollingMember, ReasonWaitingForHealth, ReasonUpToDate} {
		if !strings.Contains(got, string(want)) {
			t.Errorf("RollingUpdate reasons %s never said %s", got, want)
		}
	}
	if !strings.HasSuffix(got, string(ReasonUpToDate)) {
		t.Errorf("RollingUpdate did not end UpToDate: %s", got)
	}
}

// resume scales a dormant cluster up; its members are down because the user asked, which the world
// counts as the test's own doing until they run again.
func resume(n int32) func(*world) {
	return func(w *world) {
		w.cluster.Spec.Replicas = ptrTo(n)
		for _, m := range w.members {
			w.faults[m.name] = true
		}
	}
}
