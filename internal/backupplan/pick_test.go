package backupplan

import (
	"testing"
)

func TestLastSuccessful(t *testing.T) {
	tests := []struct {
		name  string
		items []string
		// pick is what status.backup.lastSuccessfulBackup names; newer the newer Succeeded backup
		// it was preferred over ("" when pick is the newest).
		pick, newer string
	}{
		{name: "nothing", pick: "", newer: ""},
		{name: "no success", items: []string{"b1:F@-2h", "b2:R@-1h"}, pick: ""},
		{name: "no verification: the newest success", items: []string{"b1:S@-3h", "b2:S@-1h", "b3:F@-1m"}, pick: "b2"},
		{name: "the newest verified", items: []string{"b1:V@-3h", "b2:V@-1h"}, pick: "b2"},
		{name: "pending: the older verified, naming the newer", items: []string{"b1:V@-3h", "b2:W@-1h"}, pick: "b1", newer: "b2"},
		{name: "drill failed: the older verified, naming the newest", items: []string{"b1:V@-3h", "b2:X@-2h", "b3:X@-1h"}, pick: "b1", newer: "b3"},
		{name: "nothing verified: the newest anyway", items: []string{"b1:X@-3h", "b2:W@-1h"}, pick: "b2"},
		{name: "the newest was not asked to verify: it wins over an older verified", items: []string{"b1:V@-3h", "b2:S@-1h"}, pick: "b2"},
		{name: "a verified backup older than a failed drill", items: []string{"b1:V@-9h", "b2:V@-5h", "b3:X@-1h"}, pick: "b2", newer: "b3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pick, newer := LastSuccessful(backups(t, tt.items...))
			if name(pick) != tt.pick || name(newer) != tt.newer {
				t.Errorf("LastSuccessful = %q, %q; want %q, %q", name(pick), name(newer), tt.pick, tt.newer)
			}
			if pick != nil && pick.Phase != PhaseSucceeded {
				t.Errorf("picked %s in phase %s", pick.Name, pick.Phase)
			}
		})
	}
}

// TestLastSuccessfulTies: the order of the input never changes the pick.
func TestLastSuccessfulTies(t *testing.T) {
	a := []Item{{Name: "a", Phase: PhaseSucceeded, Drill: DrillPassed, Completed: at(1, 0)},
		{Name: "b", Phase: PhaseSucceeded, Drill: DrillPassed, Completed: at(1, 0)}}
	p1, _ := LastSuccessful(a)
	p2, _ := LastSuccessful([]Item{a[1], a[0]})
	if name(p1) != "b" || name(p2) != "b" {
		t.Errorf("ties picked %s and %s, want b (the later name) both times", name(p1), name(p2))
	}
}

func name(it *Item) string {
	if it == nil {
		return ""
	}
	return it.Name
}
