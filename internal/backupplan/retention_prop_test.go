package backupplan

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// randomBackups is up to 30 backups over 60 days, every phase, with ties in time now and then.
func randomBackups(r *rand.Rand, now time.Time) []Item {
	phases := []Phase{PhaseSucceeded, PhaseSucceeded, PhaseSucceeded, PhaseFailed, PhaseFailed, PhaseRunning, PhasePending, ""}
	var items []Item
	for i := range r.IntN(31) {
		ago := time.Duration(r.Int64N(int64(60 * day))).Truncate(time.Hour)
		if r.IntN(4) == 0 {
			ago = time.Duration(r.IntN(3)) * time.Hour // ties
		}
		it := Item{Name: fmt.Sprintf("b%02d", i), Phase: phases[r.IntN(len(phases))], Created: now.Add(-ago - time.Hour)}
		if it.Phase == PhaseSucceeded {
			it.Drill = []Drill{DrillNone, DrillPending, DrillPassed, DrillFailed}[r.IntN(4)]
		}
		if it.Phase.Terminal() && r.IntN(10) > 0 {
			it.Completed = now.Add(-ago)
		}
		items = append(items, it)
	}
	return items
}

// TestPruneProperties: over many generated inputs, Prune never deletes the newest success, the
// newest verified success, nor anything not finished, keeps what the rules promise, answers the same for any input order, and
// is a fixed point: pruning what it leaves deletes nothing more.
func TestPruneProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	now := at(100, 0)
	for i := range 5000 {
		in := RetentionInput{Items: randomBackups(r, now), KeepLast: r.IntN(12) - 2, Now: now}
		if r.IntN(2) == 0 {
			in.MaxAge = time.Duration(1+r.IntN(40*24)) * time.Hour
		}
		got := Prune(in)
		fail := func(format string, args ...any) {
			t.Fatalf("case %d: %s\ninput %+v\ndeleted %v", i, fmt.Sprintf(format, args...), in, got)
		}
		keep := in.KeepLast
		if keep == 0 {
			keep = DefaultKeepLast
		}
		keep = max(keep, 1)

		byName := map[string]Item{}
		for _, it := range in.Items {
			byName[it.Name] = it
		}
		deleted := map[string]bool{}
		for j, name := range got {
			it, ok := byName[name]
			switch {
			case !ok:
				fail("deleted %s, which does not exist", name)
			case deleted[name]:
				fail("deleted %s twice", name)
			case !it.Phase.Terminal():
				fail("deleted %s in phase %q", name, it.Phase)
			case j > 0 && newestFirst(byName[got[j-1]], it) < 0:
				fail("not oldest first at %s", name)
			}
			deleted[name] = true
		}

		var ok, failed []Item // newest first
		for _, it := range in.Items {
			switch it.Phase {
			case PhaseSucceeded:
				ok = append(ok, it)
			case PhaseFailed:
				failed = append(failed, it)
			}
		}
		slices.SortFunc(ok, newestFirst)
		slices.SortFunc(failed, newestFirst)
		if len(ok) > 0 && deleted[ok[0].Name] {
			fail("deleted the newest success %s", ok[0].Name)
		}
		newestVerified := ""
		for _, it := range ok {
			if it.Drill == DrillPassed {
				newestVerified = it.Name
				break
			}
		}
		if newestVerified != "" && deleted[newestVerified] {
			fail("deleted the newest verified success %s", newestVerified)
		}
		for j, it := range ok {
			young := in.MaxAge == 0 || now.Sub(when(it)) <= in.MaxAge
			if want := j == 0 || j < keep && young || it.Name == newestVerified; deleted[it.Name] == want {
				fail("success %s (#%d, young %v): deleted %v", it.Name, j, young, deleted[it.Name])
			}
		}
		kept := 0
		for j, it := range failed {
			if deleted[it.Name] {
				continue
			}
			kept++
			newer := len(ok) == 0 || when(it).After(when(ok[0]))
			if !newer && j != 0 {
				fail("kept failure %s, neither newer than the newest success nor the newest failure", it.Name)
			}
		}
		if kept > keep+1 {
			fail("kept %d failures with KeepLast %d", kept, keep)
		}
		if len(failed) > 0 && len(ok) == 0 && deleted[failed[0].Name] {
			fail("deleted the only record of why backups fail, %s", failed[0].Name)
		}

		shuffled := slices.Clone(in.Items)
		r.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		if again := Prune(RetentionInput{Items: shuffled, KeepLast: in.KeepLast, MaxAge: in.MaxAge, Now: now}); !slices.Equal(again, got) {
			fail("input order changed the answer: %v", again)
		}
		var left []Item
		for _, it := range in.Items {
			if !deleted[it.Name] {
				left = append(left, it)
			}
		}
		if more := Prune(RetentionInput{Items: left, KeepLast: in.KeepLast, MaxAge: in.MaxAge, Now: now}); more != nil {
			fail("pruning what was left deletes %v", more)
		}
	}
}
