package backupplan

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// backups builds items from a compact spelling: "b3:S@-5h" is b3, Succeeded, completed 5 hours
// before now (at(100, 0)); phases are S, F, R, P, N (none yet) and U (unknown), and V, X, W are
// Succeeded with a restore drill that passed, failed, or is pending. Created is an hour earlier;
// Running and Pending ones have no completion time.
func backups(t *testing.T, specs ...string) []Item {
	t.Helper()
	phases := map[byte]Phase{'S': PhaseSucceeded, 'F': PhaseFailed, 'R': PhaseRunning, 'P': PhasePending, 'N': "", 'U': "Weird",
		'V': PhaseSucceeded, 'X': PhaseSucceeded, 'W': PhaseSucceeded}
	drills := map[byte]Drill{'V': DrillPassed, 'X': DrillFailed, 'W': DrillPending}
	var out []Item
	for _, s := range specs {
		var name string
		var ph byte
		var agoText string
		if _, err := fmt.Sscanf(s, "%2s:%c@%s", &name, &ph, &agoText); err != nil {
			t.Fatalf("bad item %q: %v", s, err)
		}
		ago, err := time.ParseDuration(agoText)
		if err != nil {
			t.Fatalf("bad item %q: %v", s, err)
		}
		it := Item{Name: name, Phase: phases[ph], Drill: drills[ph], Created: at(100, 0).Add(ago - time.Hour)}
		if it.Phase.Terminal() {
			it.Completed = at(100, 0).Add(ago)
		}
		out = append(out, it)
	}
	return out
}

func TestPrune(t *testing.T) {
	tests := []struct {
		name   string
		items  []string
		keep   int
		maxAge time.Duration
		want   []string // oldest first
	}{
		{name: "nothing", want: nil},
		{name: "fewer than KeepLast", items: []string{"b1:S@-3h", "b2:S@-2h", "b3:S@-1h"}, want: nil},
		{name: "KeepLast 0 means 7: two oldest of 9 go, oldest first",
			items: []string{"b5:S@-5h", "b1:S@-9h", "b2:S@-8h", "b3:S@-7h", "b4:S@-6h", "b6:S@-4h", "b7:S@-3h", "b8:S@-2h", "b9:S@-1h"},
			want:  []string{"b1", "b2"}},
		{name: "KeepLast 3", keep: 3, items: []string{"b1:S@-4h", "b2:S@-3h", "b3:S@-2h", "b4:S@-1h"}, want: []string{"b1"}},
		{name: "KeepLast below 1 means 1", keep: -4, items: []string{"b1:S@-3h", "b2:S@-2h", "b3:S@-1h"}, want: []string{"b1", "b2"}},
		{name: "KeepLast 1 keeps the newest", keep: 1, items: []string{"b1:S@-3h", "b2:S@-1h", "b3:S@-2h"}, want: []string{"b1", "b3"}},
		{name: "MaxAge deletes within KeepLast", maxAge: 72 * time.Hour,
			items: []string{"b1:S@-120h", "b2:S@-96h", "b3:S@-73h", "b4:S@-71h", "b5:S@-1h"}, want: []string{"b1", "b2", "b3"}},
		{name: "MaxAge never deletes the newest success", maxAge: time.Hour,
			items: []string{"b1:S@-300h", "b2:S@-200h", "b3:S@-100h"}, want: []string{"b1", "b2"}},
		{name: "MaxAge at the limit exactly keeps", maxAge: 2 * time.Hour, items: []string{"b1:S@-2h", "b2:S@-1h"}, want: nil},
		{name: "Pending, Running and unknown phases are never deleted", keep: 1, maxAge: time.Hour,
			items: []string{"b1:P@-500h", "b2:R@-400h", "b3:U@-300h", "b4:S@-200h", "b5:S@-100h"}, want: []string{"b4"}},
		{name: "a phase not yet set counts as Pending", keep: 1, maxAge: time.Hour,
			items: []string{"b0:N@-90h", "b1:S@-2h", "b2:S@-1h"}, want: []string{"b1"}},
		{name: "failures since the newest success are kept, up to KeepLast", keep: 2,
			items: []string{"b1:S@-10h", "b2:F@-4h", "b3:F@-3h", "b4:F@-2h", "b5:F@-1h"}, want: []string{"b2", "b3"}},
		{name: "the streak is kept whatever its age", keep: 2, maxAge: time.Hour,
			items: []string{"b1:S@-10h", "b2:F@-5h", "b3:F@-4h"}, want: nil},
		{name: "nothing ever succeeded: the newest KeepLast failures stay", keep: 2, maxAge: time.Hour,
			items: []string{"b1:F@-30h", "b2:F@-20h", "b3:F@-10h"}, want: []string{"b1"}},
		{name: "before the newest success only the newest failure stays",
			items: []string{"b1:F@-9h", "b2:F@-8h", "b3:S@-7h", "b4:F@-6h", "b5:S@-1h"}, want: []string{"b1", "b2"}},
		{name: "the last failure goes once older than MaxAge", maxAge: 24 * time.Hour,
			items: []string{"b1:F@-30h", "b2:S@-1h"}, want: []string{"b1"}},
		{name: "the last failure stays within MaxAge", maxAge: 24 * time.Hour,
			items: []string{"b1:F@-20h", "b2:S@-1h"}, want: nil},
		{name: "a streak and an older failure: both stay", keep: 3,
			items: []string{"b1:F@-9h", "b2:S@-5h", "b3:F@-1h"}, want: []string{"b1"}},
		{name: "a failure at the same instant as the newest success is not in the streak",
			items: []string{"b1:F@-3h", "b2:F@-2h", "b3:S@-2h"}, want: []string{"b1"}},
		// Issue 23: counting successes whatever their drill said pruned the only backup known to
		// restore while keeping newer ones known not to.
		{name: "the newest verified backup stays past KeepLast while newer ones failed their drill", keep: 3,
			items: []string{"b1:V@-4h", "b2:X@-3h", "b3:X@-2h", "b4:X@-1h"}, want: nil},
		{name: "the newest verified backup stays past MaxAge", maxAge: 24 * time.Hour,
			items: []string{"b1:V@-72h", "b2:W@-48h", "b3:X@-1h"}, want: []string{"b2"}},
		{name: "only the newest verified backup is protected", keep: 1,
			items: []string{"b1:V@-5h", "b2:V@-4h", "b3:W@-2h", "b4:X@-1h"}, want: []string{"b1", "b3"}},
		{name: "a verified newest protects nothing older", keep: 1,
			items: []string{"b1:V@-3h", "b2:X@-2h", "b3:V@-1h"}, want: []string{"b1", "b2"}},
		{name: "a drill never run protects nothing", keep: 1,
			items: []string{"b1:S@-3h", "b2:W@-2h", "b3:X@-1h"}, want: []string{"b1", "b2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Prune(RetentionInput{Items: backups(t, tt.items...), KeepLast: tt.keep, MaxAge: tt.maxAge, Now: at(100, 0)})
			if !slices.Equal(got, tt.want) {
				t.Errorf("Prune = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPruneOrderAndTimes: ties are broken by creation, then name; a backup that never recorded
// its completion is dated by its creation.
func TestPruneOrderAndTimes(t *testing.T) {
	same := at(10, 0)
	items := []Item{
		{Name: "c", Phase: PhaseSucceeded, Completed: same, Created: at(9, 0)},
		{Name: "a", Phase: PhaseSucceeded, Completed: same, Created: at(9, 0)},
		{Name: "b", Phase: PhaseSucceeded, Completed: same, Created: at(8, 0)},
		{Name: "old-no-completion", Phase: PhaseSucceeded, Created: at(1, 0)},
		{Name: "new-no-completion", Phase: PhaseSucceeded, Created: at(20, 0)},
	}
	got := Prune(RetentionInput{Items: items, KeepLast: 2, Now: at(30, 0)})
	want := []string{"old-no-completion", "b", "a"}
	if !slices.Equal(got, want) {
		t.Errorf("Prune = %v, want %v (kept: new-no-completion, c)", got, want)
	}
	if Phase("").Terminal() || PhaseRunning.Terminal() || !PhaseFailed.Terminal() || !PhaseSucceeded.Terminal() {
		t.Error("Terminal is wrong")
	}
}
