// Package schedule parses the schedules Steward runs work on (an EtcdBackupSchedule's backups, a
// cluster's scheduled defragmentation) and computes their slots. It is pure: time is passed in,
// nothing reads the wall clock.
//
// Choices made here:
//
//   - Time: schedules run in UTC, so no slot repeats or vanishes with daylight saving; TZ= and
//     CRON_TZ= prefixes are refused.
//   - "@every d" slots are counted from an anchor the caller passes (the creation of the
//     EtcdBackupSchedule, or of the cluster): anchor + k*d; d is at least MinInterval.
package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// MinInterval is the shortest "@every" Steward accepts: backups are named by the minute of their
// slot (backupplan.BackupName), so two slots must never share a minute. Five-field cron cannot go
// below it.
const MinInterval = time.Minute

// Schedule is a parsed schedule. Every time it produces is in UTC: there is no time zone and
// no daylight saving, so a slot never repeats or vanishes.
type Schedule struct {
	spec  string
	cron  *cron.SpecSchedule // five fields or a named descriptor
	every time.Duration      // "@every": slots at anchor + k*every, k >= 1
}

var fieldNames = [5]string{"minute", "hour", "day-of-month", "month", "day-of-week"}

// field5 parses five-field cron and the descriptors (@hourly, @daily, @every 10m, ...).
var field5 = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse reads a schedule: standard five-field cron ("0 3 * * *"), a descriptor (@yearly,
// @annually, @monthly, @weekly, @daily, @midnight, @hourly) or "@every <duration>" of at least a
// minute. It refuses a seconds field and time-zone prefixes (schedules run in UTC) and schedules that
// never fire. Errors name the part that is wrong, in the words of the field the user wrote.
func Parse(spec string) (Schedule, error) {
	s := strings.TrimSpace(spec)
	switch {
	case s == "":
		return Schedule{}, errors.New(`schedule is empty: use five-field cron such as "0 3 * * *" (03:00 UTC daily) or a descriptor such as @hourly`)
	case strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ="):
		return Schedule{}, fmt.Errorf("schedule %q: time zones are not supported; schedules run in UTC, write the time in UTC", spec)
	case strings.HasPrefix(s, "@every"):
		return parseEvery(spec, s)
	case strings.HasPrefix(s, "@"):
		sched, err := field5.Parse(s)
		if err != nil {
			return Schedule{}, fmt.Errorf("schedule %q: unknown descriptor; use @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every <duration>", spec)
		}
		return fromSpec(spec, sched)
	}
	fields := strings.Fields(s)
	switch n := len(fields); {
	case n == 6:
		return Schedule{}, fmt.Errorf("schedule %q has 6 fields: a seconds field is not supported; use the 5 fields of standard cron (minute hour day-of-month month day-of-week)", spec)
	case n != 5:
		return Schedule{}, fmt.Errorf("schedule %q has %d fields; standard cron has 5 (minute hour day-of-month month day-of-week), e.g. \"0 3 * * *\"", spec, n)
	}
	// Parse each field alone (the others "*") so the error names the field that is wrong.
	for i, f := range fields {
		probe := []string{"*", "*", "*", "*", "*"}
		probe[i] = f
		if _, err := field5.Parse(strings.Join(probe, " ")); err != nil {
			return Schedule{}, fmt.Errorf("schedule %q: the %s field %q is invalid: %w", spec, fieldNames[i], f, err)
		}
	}
	sched, err := field5.Parse(s)
	if err != nil {
		return Schedule{}, fmt.Errorf("schedule %q: %w", spec, err)
	}
	return fromSpec(spec, sched)
}

func parseEvery(spec, s string) (Schedule, error) {
	arg := strings.TrimSpace(strings.TrimPrefix(s, "@every"))
	d, err := time.ParseDuration(arg)
	if err != nil || arg == "" || !strings.HasPrefix(s, "@every ") {
		return Schedule{}, fmt.Errorf("schedule %q: @every needs a duration such as \"@every 30m\" or \"@every 6h\"", spec)
	}
	if d < MinInterval || d%time.Second != 0 {
		return Schedule{}, fmt.Errorf("schedule %q: @every must be a whole number of seconds, at least %v", spec, MinInterval)
	}
	return Schedule{spec: spec, every: d}, nil
}

func fromSpec(spec string, sched cron.Schedule) (Schedule, error) {
	cs, ok := sched.(*cron.SpecSchedule)
	if !ok {
		return Schedule{}, fmt.Errorf("schedule %q: unsupported form", spec)
	}
	utc := *cs
	utc.Location = time.UTC
	out := Schedule{spec: spec, cron: &utc}
	// Day 30 of February and the like: no slot in the next five years (robfig's search limit).
	if out.cron.Next(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return Schedule{}, fmt.Errorf("schedule %q never fires: no date matches its day-of-month, month and day-of-week", spec)
	}
	return out, nil
}

// String is the schedule as written.
func (s Schedule) String() string { return s.spec }

// IsZero: the schedule was never parsed.
func (s Schedule) IsZero() bool { return s.cron == nil && s.every == 0 }

// Next is the first slot strictly after t; anchor (the schedule's creation) places @every slots.
// Zero when the schedule fires no more (a cron date beyond robfig's five-year search).
func (s Schedule) Next(anchor, t time.Time) time.Time {
	t = t.UTC()
	if s.every > 0 {
		a := anchor.UTC().Truncate(time.Second)
		if t.Before(a) {
			return a.Add(s.every)
		}
		return a.Add((t.Sub(a)/s.every + 1) * s.every)
	}
	if s.cron == nil {
		return time.Time{}
	}
	return s.cron.Next(t).UTC()
}

// maxWindow bounds Latest's doubling window well below time.Duration's 292 years.
const maxWindow = 100 * 365 * 24 * time.Hour

// Latest is the last slot in (after, t], found without walking every slot in between: the window
// before t doubles until it holds a slot. ok is false when there is none. anchor places @every
// slots, as in Next.
func (s Schedule) Latest(anchor, after, t time.Time) (time.Time, bool) {
	first := s.Next(anchor, after)
	if first.IsZero() || first.After(t) {
		return time.Time{}, false
	}
	for w := time.Minute; ; w *= 2 {
		from := t.Add(-w)
		if w > maxWindow || !from.After(after) {
			from = after
		}
		if x := s.Next(anchor, from); !x.IsZero() && !x.After(t) {
			for y := s.Next(anchor, x); !y.IsZero() && !y.After(t); y = s.Next(anchor, y) {
				x = y
			}
			return x, true
		}
	}
}

// Count is the number of slots in (after, last], last being a slot (from Latest); it stops at
// limit, so counting the slots of a long outage stays cheap. anchor places @every slots.
func (s Schedule) Count(anchor, after, last time.Time, limit int) int {
	if s.every > 0 {
		return int(min(int64(limit), int64(last.Sub(s.Next(anchor, after))/s.every)+1))
	}
	n := 0
	for x := s.Next(anchor, after); !x.IsZero() && !x.After(last) && n < limit; x = s.Next(anchor, x) {
		n++
	}
	return n
}

// Interval is how often the schedule fires around a moment: the longest gap between its last two
// slots at or before around and its first slot after it. For "@every d" it is d; for "0 9,17 * * 1-5"
// it is 64h over a weekend and 16h on a weeknight, so an irregular schedule does not look overdue
// over the weekend (backupplan's BackupReady calls a backup stale beyond twice this). Zero for a
// schedule that fires no more.
func Interval(s Schedule, around time.Time) time.Duration {
	if s.every > 0 {
		return s.every
	}
	around = around.UTC()
	next := s.Next(time.Time{}, around)
	if next.IsZero() {
		return 0
	}
	floor := around.AddDate(-5, 0, 0)
	p1, ok := s.Latest(time.Time{}, floor, around)
	if !ok {
		if after := s.Next(time.Time{}, next); !after.IsZero() {
			return after.Sub(next)
		}
		return 0
	}
	gap := next.Sub(p1)
	if p0, ok := s.Latest(time.Time{}, floor, p1.Add(-time.Second)); ok {
		gap = max(gap, p1.Sub(p0))
	}
	return gap
}

// FiredSince says whether a slot fell in (since, now]: work run "once per slot" (a scheduled
// defragmentation) that last happened at since is due again. anchor places @every slots.
func (s Schedule) FiredSince(anchor, since, now time.Time) bool {
	n := s.Next(anchor, since)
	return !n.IsZero() && !n.After(now)
}
