package backupplan

import (
	"cmp"
	"slices"
	"time"
)

// Phase is an EtcdBackup's phase. "" (a backup nobody has looked at yet) counts as Pending.
type Phase string

const (
	PhasePending   Phase = "Pending"
	PhaseRunning   Phase = "Running"
	PhaseSucceeded Phase = "Succeeded"
	PhaseFailed    Phase = "Failed"
)

// Terminal phases never change again.
func (p Phase) Terminal() bool { return p == PhaseSucceeded || p == PhaseFailed }

// DefaultKeepLast is how many successful backups a schedule keeps when the user says nothing.
const DefaultKeepLast = 7

// Drill is what a Succeeded backup's restore drill (spec.verify) said.
type Drill string

const (
	// DrillNone: the backup did not ask for a drill.
	DrillNone Drill = ""
	// DrillPending: a drill was asked for and has no result yet.
	DrillPending Drill = "Pending"
	// DrillPassed: the snapshot restored into a throwaway etcd at its recorded revision.
	DrillPassed Drill = "Passed"
	// DrillFailed: the drill ran and the snapshot did not restore (or the drill could not run).
	DrillFailed Drill = "Failed"
)

// Item is one backup, as retention and LastSuccessful see it.
type Item struct {
	Name  string
	Phase Phase
	// Completed is when the backup finished (zero while it runs); Created its creation time.
	// Backups are ordered and aged by Completed, or by Created when Completed is unknown.
	Completed time.Time
	Created   time.Time
	// Drill is the restore drill's result; it matters only for Succeeded backups.
	Drill Drill
}

// RetentionInput is a schedule's backups and its retention settings.
type RetentionInput struct {
	Items []Item
	// KeepLast is how many successful backups to keep: 0 means DefaultKeepLast, anything below 1
	// means 1.
	KeepLast int
	// MaxAge, when positive, deletes successful backups older than it, even within KeepLast,
	// except the newest.
	MaxAge time.Duration
	Now    time.Time
}

// Prune returns the backups to delete, oldest first (ties by name).
//
// Succeeded: the newest is never deleted, whatever its age, nor the newest whose restore drill
// passed (a newer backup that failed its drill, or has not run it, is no proof the data can be
// restored; the verified one is). The newest KeepLast are kept unless older than MaxAge; the rest
// are deleted.
//
// Failed backups are kept to debug the failure a user is looking at, and go once it is history:
//   - the failures since the newest success (the current streak, or all of them when nothing ever
//     succeeded) are kept, the newest KeepLast of them, whatever their age: while backups fail,
//     they are the only record of why;
//   - the newest failure is kept even when a success followed it (the last thing that went wrong
//     stays visible), until it is older than MaxAge;
//   - every other Failed backup is deleted.
//
// Pending, Running and unknown phases are never deleted.
func Prune(in RetentionInput) []string {
	keep := in.KeepLast
	switch {
	case keep == 0:
		keep = DefaultKeepLast
	case keep < 1:
		keep = 1
	}
	var ok, failed []Item
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
	tooOld := func(it Item) bool { return in.MaxAge > 0 && in.Now.Sub(when(it)) > in.MaxAge }

	verified := slices.IndexFunc(ok, func(it Item) bool { return it.Drill == DrillPassed })
	var drop []Item
	for i, it := range ok {
		if i > 0 && i != verified && (i >= keep || tooOld(it)) {
			drop = append(drop, it)
		}
	}
	var newestOK time.Time
	if len(ok) > 0 {
		newestOK = when(ok[0])
	}
	streak := 0
	for i, it := range failed {
		inStreak := len(ok) == 0 || when(it).After(newestOK)
		switch {
		case inStreak && streak < keep:
			streak++
		case i == 0 && !inStreak && !tooOld(it):
		default:
			drop = append(drop, it)
		}
	}
	if len(drop) == 0 {
		return nil
	}
	slices.SortFunc(drop, func(a, b Item) int { return newestFirst(b, a) })
	names := make([]string, len(drop))
	for i, it := range drop {
		names[i] = it.Name
	}
	return names
}

// when is the moment a backup is ordered and aged by.
func when(it Item) time.Time {
	if !it.Completed.IsZero() {
		return it.Completed
	}
	return it.Created
}

// newestFirst orders by completion (or creation), then creation, then name: a total order, so the
// input's order never changes the answer.
func newestFirst(a, b Item) int {
	if c := when(b).Compare(when(a)); c != 0 {
		return c
	}
	if c := b.Created.Compare(a.Created); c != 0 {
		return c
	}
	return cmp.Compare(b.Name, a.Name)
}
