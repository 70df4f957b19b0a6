package plan

import (
	"fmt"
	"strings"
	"testing"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

const memory = stewardv1.StorageMediumMemory

var media = []stewardv1.StorageMedium{stewardv1.StorageMediumDefault, memory}

func mediumName(m stewardv1.StorageMedium) string {
	if m == memory {
		return "memory"
	}
	return "pvc"
}

func scaleTo(n int32) func(*world) { return func(w *world) { w.cluster.Spec.Replicas = ptrTo(n) } }

func both(fs ...func(*world)) func(*world) {
	return func(w *world) {
		for _, f := range fs {
			f(w)
		}
	}
}

// killPod deletes a member's Pod behind the operator's back (a node lost, a user's kubectl delete).
func killPod(name string) func(*world) {
	return func(w *world) {
		w.member(name).pod = nil
		w.faults[name] = true
		w.faultStep = w.step
	}
}

// crashLoop makes a member's etcd crash on every start, optionally by OOM kill.
func crashLoop(name string, oom bool) func(*world) {
	return func(w *world) {
		p := w.member(name).pod
		p.crashing, p.oom, p.running = true, oom, false
		w.faults[name] = true
		w.faultStep = w.step
	}
}

func setVersion(v string) func(*world) { return func(w *world) { w.cluster.Spec.Version = v } }

func leadWith(name string) func(*world) {
	return func(w *world) { w.leader = w.entry(w.member(name)).id }
}

func ids(w *world) map[string]uint64 {
	out := map[string]uint64{}
	for _, e := range w.etcd {
		out[e.name] = e.id
	}
	return out
}

// rolled lists the members a roll disrupted, in order.
func rolled(w *world) []string {
	var out []string
	for _, e := range w.disruptions(ReasonRollingMember) {
		out = append(out, e.member)
	}
	return out
}

// simLag is the share of steps planned on a stale Pod list (issue 10: the cache lags).
const simLag = 0.3

// Test_RollingSequences runs whole rollouts, scalings and repairs in the simulator, asserting the
// invariants (docs/design.md) at every step (the world checks them as each action lands) and the end state.
func Test_RollingSequences(t *testing.T) {
	tests := []struct {
		name   string
		n      int32
		media  []stewardv1.StorageMedium
		hooks  map[int]func(*world)
		expect func(t *testing.T, w *world, before map[string]uint64)
	}{
		{
			name: "roll 3", n: 3, media: media, hooks: map[int]func(*world){1: changeResources("100m")},
			expect: func(t *testing.T, w *world, _ map[string]uint64) {
				wantOrder(t, w, "c-2", "c-1", "c-0")
			},
		},
		{
			name: "roll 5", n: 5, media: media, hooks: map[int]func(*world){1: changeResources("100m")},
			expect: func(t *testing.T, w *world, _ map[string]uint64) {
				wantOrder(t, w, "c-4", "c-3", "c-2", "c-1", "c-0")
			},
		},
		{
			name: "roll 3 with a follower-ordinal leader: leader last, handed to the lowest updated", n: 3, media: media,
			hooks: map[int]func(*world){1: both(leadWith("c-1"), changeResources("100m"))},
			expect: func(t *testing.T, w *world, _ map[string]uint64) {
				wantOrder(t, w, "c-2", "c-0", "c-1")
			},
		},
		{
			name: "roll 5 with leader in the middle", n: 5, media: media,
			hooks: map[int]func(*world){1: both(leadWith("c-2"), setVersion("3.5.33"))},
			expect: func(t *testing.T, w *world, _ map[string]uint64) {
				wantOrder(t, w, "c-4", "c-3", "c-1", "c-0", "c-2")
			},
		},
		{
			name: "scale 3 -> 5 -> 3 -> 1 -> 3", n: 3, media: media,
			hooks: map[int]func(*world){1: scaleTo(5), 40: scaleTo(3), 70: scaleTo(1), 100: scaleTo(3)},
			expect: func(t *testing.T, w *world, before map[string]uint64) {
				wantScaleDowns(t, w, "c-4", "c-3", "c-2", "c-1")
				if ids(w)["c-0"] != before["c-0"] {
					t.Errorf("c-0 was replaced; scaling must not touch survivors")
				}
			},
		},
		{
			name: "roll and scale up at once: new members are never rolled", n: 3, media: media,
			hooks: map[int]func(*world){1: both(scaleTo(5), changeResources("200m"))},
			expect: func(t *testing.T, w *world, _ map[string]uint64) {
				wantOrder(t, w, "c-2", "c-1", "c-0")
			},
		},
		{
			name: "roll and scale down at once: members to be removed are never rolled", n: 5, media: media,
			hooks: map[int]func(*world){1: both(scaleTo(3), changeResources("200m"))},
			expect: func(t *testing.T, w *world, _ map[string]uint64) {
				wantOrder(t, w, "c-2", "c-1", "c-0")
				wantScaleDowns(t, w, "c-4", "c-3")
			},
		},
		{
			name: "spec changed again mid-roll: the latest spec wins", n: 3, media: media,
			hooks: map[int]func(*world){1: changeResources("100m"), 6: changeResources("300m")},
		},
		{
			name: "spec changed mid-roll, with a scale-up", n: 3, media: media,
			hooks: map[int]func(*world){1: changeResources("100m"), 5: both(changeResources("300m"), scaleTo(5))},
		},
		{
			name: "follower fails mid-roll: repaired before the roll goes on", n: 5, media: media,
			hooks: map[int]func(*world){1: changeResources("100m"), 4: killPod("c-1")},
			expect: func(t *testing.T, w *world, _ map[string]uint64) {
				wantRepairedFirst(t, w, "c-1")
			},
		},
		{
			name: "the leader crash-loops mid-roll", n: 5, media: media,
			hooks: map[int]func(*world){1: changeResources("100m"), 3: crashLoop("c-0", false)},
			expect: func(t *testing.T, w *world, _ map[string]uint64) {
				wantRepairedFirst(t, w, "c-0")
			},
		},
		{
			name: "scale up from 1", n: 1, media: media, hooks: map[int]func(*world){1: scaleTo(3)},
		},
		{
			name: "version patch then minor", n: 3, media: media,
			hooks: map[int]func(*world){1: setVersion("3.5.33"), 40: setVersion("3.6.12")},
		},
	}
	for _, tt := range tests {
		for _, med := range tt.media {
			t.Run(fmt.Sprintf("%s/%s", tt.name, mediumName(med)), func(t *testing.T) {
				w := formedWorld(t, tt.n, med)
				w.lag, w.etcdLag = simLag, simLag
				before := ids(w)
				w.converge(tt.hooks)
				w.assertConverged()
				if tt.expect != nil {
					tt.expect(t, w, before)
				}
			})
		}
	}
}

// wantOrder: the roll disrupted exactly these members in this order, never one while it led.
func wantOrder(t *testing.T, w *world, want ...string) {
	t.Helper()
	if got := rolled(w); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("roll order = %v, want %v\n%s", got, want, w.tail(60))
	}
	for _, e := range w.disruptions(ReasonRollingMember) {
		if e.leader {
			t.Errorf("%s was rolled while it led", e.member)
		}
	}
}

// wantScaleDowns: scale-in took these members, in this order (always the highest ordinal).
func wantScaleDowns(t *testing.T, w *world, want ...string) {
	t.Helper()
	var got []string
	for _, e := range w.events {
		if e.kind == DeleteMember && e.reason == ReasonScalingDown {
			got = append(got, e.member)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("scale-downs = %v, want %v", got, want)
	}
}

// wantRepairedFirst: after the test broke member, the roll disrupted nobody else until member was
// repaired.
func wantRepairedFirst(t *testing.T, w *world, member string) {
	t.Helper()
	repaired, nextRoll := 0, 0
	for _, e := range w.events {
		switch {
		case e.step < w.faultStep:
		case e.member == member && (e.reason == ReasonMemberPodMissing || e.reason == ReasonMemberDataLost || e.reason == ReasonMemberCrashLooping):
			if repaired == 0 {
				repaired = e.step
			}
		case e.reason == ReasonRollingMember && e.member != member:
			if nextRoll == 0 {
				nextRoll = e.step
			}
		}
	}
	if repaired == 0 || (nextRoll != 0 && nextRoll < repaired) {
		t.Errorf("fault on %s at step %d: repaired at step %d, next roll at step %d:\n%s",
			member, w.faultStep, repaired, nextRoll, names(w.events))
	}
}
