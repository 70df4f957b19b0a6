package backupplan

import (
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/schedule"
)

func TestBackupName(t *testing.T) {
	if got := BackupName("nightly", at(11, 0)); got != "nightly-29540820" {
		t.Errorf("BackupName = %q", got)
	}
	if BackupName("s", atS(11, 0, 59)) != BackupName("s", at(11, 0)) {
		t.Error("seconds within the slot's minute changed the name")
	}
	// Slots at least a minute apart never share a name, whatever their seconds.
	s := mustParse(t, "@every 61s")
	seen := map[string]bool{}
	for _, slot := range bruteSlots(s, atS(0, 0, 59), at(0, 0), at(30, 0)) {
		n := BackupName("s", slot)
		if seen[n] {
			t.Fatalf("two slots named %s", n)
		}
		seen[n] = true
	}
}

// monday is the injected clock of every test (2026-03-02, a Monday, 00:00 UTC): nothing here reads
// the wall clock or sleeps.
var monday = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

// at is monday plus a clock reading: at(11, 20) is Monday 11:20 UTC. Hours past 23 run into the
// following days.
func at(h, m int) time.Time {
	return monday.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
}

// atS is at with seconds.
func atS(h, m, s int) time.Time { return at(h, m).Add(time.Duration(s) * time.Second) }

func ptr[T any](v T) *T { return &v }

func mustParse(t testing.TB, spec string) schedule.Schedule {
	t.Helper()
	s, err := schedule.Parse(spec)
	if err != nil {
		t.Fatalf("Parse(%q): %v", spec, err)
	}
	return s
}

// bruteSlots lists every slot in (after, now] by walking the schedule one slot at a time: the
// oracle Decide's shortcuts are checked against.
func bruteSlots(s schedule.Schedule, anchor, after, now time.Time) []time.Time {
	var out []time.Time
	for x := s.Next(anchor, after); !x.IsZero() && !x.After(now); x = s.Next(anchor, x) {
		out = append(out, x)
	}
	return out
}
