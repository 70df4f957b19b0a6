package backupplan

import (
	"strings"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	type want struct {
		create  bool
		slot    time.Time // ScheduledTime; zero: nothing settled
		missed  int
		next    time.Time
		requeue time.Duration
		reason  string
		message string // a substring
	}
	tests := []struct {
		name     string
		spec     string
		created  time.Time
		last     *time.Time
		now      time.Time
		suspend  bool
		active   bool
		deadline time.Duration
		want     want
	}{
		{name: "before the first slot", created: at(10, 20), now: at(10, 50),
			want: want{next: at(11, 0), requeue: 10 * time.Minute, reason: ReasonWaitingForNextRun, message: "next backup at 2026-03-02T11:00:00Z"}},
		{name: "first slot due", created: at(10, 20), now: atS(11, 0, 5),
			want: want{create: true, slot: at(11, 0), next: at(12, 0), requeue: 59*time.Minute + 55*time.Second, reason: ReasonScheduled, message: "backup for slot 2026-03-02T11:00:00Z"}},
		{name: "slot exactly now", created: at(10, 20), now: at(11, 0),
			want: want{create: true, slot: at(11, 0), next: at(12, 0), requeue: time.Hour, reason: ReasonScheduled}},
		{name: "a slot at the creation instant never runs", created: at(11, 0), now: at(11, 30),
			want: want{next: at(12, 0), requeue: 30 * time.Minute, reason: ReasonWaitingForNextRun}},
		{name: "a slot before creation never runs", created: at(11, 30), now: at(11, 45),
			want: want{next: at(12, 0), requeue: 15 * time.Minute, reason: ReasonWaitingForNextRun}},
		{name: "LastScheduled before creation is ignored", created: at(11, 30), last: ptr(at(9, 0)), now: at(11, 45),
			want: want{next: at(12, 0), requeue: 15 * time.Minute, reason: ReasonWaitingForNextRun}},
		{name: "the recorded slot does not run again", created: at(0, 5), last: ptr(at(11, 0)), now: at(11, 30),
			want: want{next: at(12, 0), requeue: 30 * time.Minute, reason: ReasonWaitingForNextRun}},
		{name: "operator down 3 hours: the latest slot runs, 2 missed", created: at(0, 5), last: ptr(at(8, 0)), now: at(11, 20),
			want: want{create: true, slot: at(11, 0), missed: 2, next: at(12, 0), requeue: 40 * time.Minute, reason: ReasonScheduled, message: "; 2 slots missed"}},
		{name: "operator down 3 hours, 5m deadline: all 3 missed", created: at(0, 5), last: ptr(at(8, 0)), now: at(11, 20), deadline: 5 * time.Minute,
			want: want{slot: at(11, 0), missed: 3, next: at(12, 0), requeue: 40 * time.Minute, reason: ReasonMissedStartingDeadline, message: "slot 2026-03-02T11:00:00Z is 20m late, past the starting deadline of 5m; 3 slots missed"}},
		{name: "late but within the deadline", created: at(0, 5), last: ptr(at(10, 0)), now: at(11, 4), deadline: 5 * time.Minute,
			want: want{create: true, slot: at(11, 0), next: at(12, 0), requeue: 56 * time.Minute, reason: ReasonScheduled}},
		{name: "at the deadline exactly", created: at(0, 5), last: ptr(at(10, 0)), now: at(11, 5), deadline: 5 * time.Minute,
			want: want{create: true, slot: at(11, 0), next: at(12, 0), requeue: 55 * time.Minute, reason: ReasonScheduled}},
		{name: "no deadline: 59 minutes late still runs", created: at(0, 5), last: ptr(at(10, 0)), now: atS(11, 59, 59),
			want: want{create: true, slot: at(11, 0), next: at(12, 0), requeue: time.Second, reason: ReasonScheduled}},
		{name: "suspended with a slot due: given up, not missed", created: at(0, 5), last: ptr(at(10, 0)), now: at(11, 10), suspend: true,
			want: want{slot: at(11, 0), next: at(12, 0), requeue: 50 * time.Minute, reason: ReasonSuspended, message: "suspended: slot 2026-03-02T11:00:00Z skipped; next slot 2026-03-02T12:00:00Z"}},
		{name: "suspended for hours", created: at(0, 5), last: ptr(at(3, 0)), now: at(11, 10), suspend: true, active: true,
			want: want{slot: at(11, 0), next: at(12, 0), requeue: 50 * time.Minute, reason: ReasonSuspended}},
		{name: "suspended, nothing due: NextRun still reported", created: at(0, 5), last: ptr(at(11, 0)), now: at(11, 30), suspend: true,
			want: want{next: at(12, 0), requeue: 30 * time.Minute, reason: ReasonSuspended, message: "suspended; next slot 2026-03-02T12:00:00Z"}},
		{name: "Forbid: a slot due while a backup runs waits", created: at(0, 5), last: ptr(at(10, 0)), now: at(11, 10), active: true,
			want: want{next: at(12, 0), requeue: 50 * time.Minute, reason: ReasonBackupActive, message: "slot 2026-03-02T11:00:00Z waits for the running backup"}},
		{name: "Forbid with a deadline: requeue when it runs out", created: at(0, 5), last: ptr(at(10, 0)), now: at(11, 10), active: true, deadline: 15 * time.Minute,
			want: want{next: at(12, 0), requeue: 5*time.Minute + time.Second, reason: ReasonBackupActive, message: "until 2026-03-02T11:15:00Z"}},
		{name: "Forbid past the deadline: the slot is missed", created: at(0, 5), last: ptr(at(10, 0)), now: at(11, 20), active: true, deadline: 15 * time.Minute,
			want: want{slot: at(11, 0), missed: 1, next: at(12, 0), requeue: 40 * time.Minute, reason: ReasonMissedStartingDeadline, message: "while a backup was still running; 1 slot missed"}},
		{name: "Forbid with missed slots before: none counted until settled", created: at(0, 5), last: ptr(at(7, 0)), now: at(11, 10), active: true,
			want: want{next: at(12, 0), requeue: 50 * time.Minute, reason: ReasonBackupActive}},
		{name: "Forbid, nothing due", created: at(0, 5), last: ptr(at(11, 0)), now: at(11, 10), active: true,
			want: want{next: at(12, 0), requeue: 50 * time.Minute, reason: ReasonWaitingForNextRun}},
		{name: "schedule edited: a LastScheduled off the new schedule", spec: "@hourly", created: at(0, 5), last: ptr(at(10, 30)), now: at(11, 10),
			want: want{create: true, slot: at(11, 0), next: at(12, 0), requeue: 50 * time.Minute, reason: ReasonScheduled}},
		{name: "clock behind LastScheduled: nothing runs", created: at(0, 5), last: ptr(at(12, 0)), now: at(11, 30),
			want: want{next: at(13, 0), requeue: 90 * time.Minute, reason: ReasonWaitingForNextRun}},
		{name: "@every counts from creation", spec: "@every 10m", created: atS(10, 3, 27).Add(500 * time.Millisecond), now: atS(10, 13, 30),
			want: want{create: true, slot: atS(10, 13, 27), next: atS(10, 23, 27), requeue: 9*time.Minute + 57*time.Second, reason: ReasonScheduled}},
		{name: "@every after an outage", spec: "@every 10m", created: atS(10, 3, 27), last: ptr(atS(10, 13, 27)), now: at(11, 0),
			want: want{create: true, slot: atS(10, 53, 27), missed: 3, next: atS(11, 3, 27), requeue: 3*time.Minute + 27*time.Second, reason: ReasonScheduled}},
		{name: "daily at 03:00 UTC", spec: "0 3 * * *", created: at(-20, 0), now: atS(3, 0, 1),
			want: want{create: true, slot: at(3, 0), next: at(27, 0), requeue: day - time.Second, reason: ReasonScheduled}},
		{name: "weekdays: nothing over the weekend", spec: "0 9 * * 1-5", created: at(-30*24, 0), last: ptr(at(4*24+9, 0)), now: at(5*24+10, 0),
			want: want{next: at(7*24+9, 0), requeue: 47 * time.Hour, reason: ReasonWaitingForNextRun}},
		{name: "inputs in another zone are read in UTC", spec: "0 11 * * *", created: at(-24, 0), last: ptr(at(-13, 0)),
			now:  time.Date(2026, 3, 2, 6, 10, 0, 0, time.FixedZone("UTC-5", -5*3600)),
			want: want{create: true, slot: at(11, 0), next: at(35, 0), requeue: 23*time.Hour + 50*time.Minute, reason: ReasonScheduled}},
		{name: "every minute for 30 days: Missed saturates", spec: "* * * * *", created: at(-31*24, 0), last: ptr(at(-30*24, 0)), now: atS(0, 0, 30),
			want: want{create: true, slot: at(0, 0), missed: MissedLimit, next: at(0, 1), requeue: 30 * time.Second, reason: ReasonScheduled, message: "more than 1000 slots missed"}},
		{name: "creation time unknown (zero): the latest slot, centuries missed", created: time.Time{}, now: at(11, 20),
			want: want{create: true, slot: at(11, 0), missed: MissedLimit, next: at(12, 0), requeue: 40 * time.Minute, reason: ReasonScheduled}},
		{name: "leap day: the next run is two years away", spec: "0 0 29 2 *", created: at(0, 0), now: at(1, 0),
			want: want{next: time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC), requeue: time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC).Sub(at(1, 0)), reason: ReasonWaitingForNextRun}},
		{name: "leap day beyond robfig's five-year search: no NextRun, no requeue", spec: "0 0 29 2 *",
			created: time.Date(2097, 3, 1, 0, 0, 0, 0, time.UTC), now: time.Date(2097, 3, 2, 0, 0, 0, 0, time.UTC),
			want: want{reason: ReasonWaitingForNextRun, message: "the schedule has no slot in the next five years"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.spec
			if spec == "" {
				spec = "@hourly"
			}
			in := ScheduleInput{Schedule: mustParse(t, spec), Now: tt.now, Created: tt.created, LastScheduled: tt.last,
				Suspend: tt.suspend, Active: tt.active, StartingDeadline: tt.deadline}
			d := Decide(in)
			w := tt.want
			if d.CreateNow != w.create || !d.ScheduledTime.Equal(w.slot) || d.Missed != w.missed || !d.NextRun.Equal(w.next) ||
				d.RequeueAfter != w.requeue || d.Reason != w.reason || !strings.Contains(d.Message, w.message) {
				t.Errorf("Decide =\n  create %v slot %v missed %d next %v requeue %v %s %q\nwant\n  create %v slot %v missed %d next %v requeue %v %s %q",
					d.CreateNow, d.ScheduledTime, d.Missed, d.NextRun, d.RequeueAfter, d.Reason, d.Message,
					w.create, w.slot, w.missed, w.next, w.requeue, w.reason, w.message)
			}
			if again := Decide(in); again != d {
				t.Errorf("a second Decide on the same input differs: %+v", again)
			}
		})
	}
}

func TestDecideWithoutSchedule(t *testing.T) {
	d := Decide(ScheduleInput{Now: at(11, 0), Created: at(0, 0)})
	if d.CreateNow || !d.ScheduledTime.IsZero() || d.RequeueAfter != 0 || d.Reason != ReasonNoSchedule {
		t.Errorf("Decide without a schedule = %+v", d)
	}
}

// TestDecideCrashBeforeRecording: the operator creates the backup, then crashes before recording
// the slot. Restarted, it sees the backup active and waits; when the backup ends it decides the
// same slot again, whose name already exists: nothing runs twice.
func TestDecideCrashBeforeRecording(t *testing.T) {
	in := ScheduleInput{Schedule: mustParse(t, "@hourly"), Created: at(0, 5), LastScheduled: ptr(at(10, 0)), Now: atS(11, 0, 2)}
	first := Decide(in)
	if !first.CreateNow {
		t.Fatalf("first decision: %+v", first)
	}
	in.Now, in.Active = at(11, 1), true
	if d := Decide(in); d.CreateNow || d.Reason != ReasonBackupActive {
		t.Fatalf("restarted with the backup still running: %+v", d)
	}
	in.Now, in.Active = at(11, 9), false
	d := Decide(in)
	if !d.CreateNow || BackupName("s", d.ScheduledTime) != BackupName("s", first.ScheduledTime) {
		t.Fatalf("after the backup ended: %+v, want the same slot as %v", d, first.ScheduledTime)
	}
}

// TestDecideForbidDefers: a backup that outlasts the next slot delays it; the deferred slot runs
// as soon as the active one ends and is recorded like any other.
func TestDecideForbidDefers(t *testing.T) {
	in := ScheduleInput{Schedule: mustParse(t, "@hourly"), Created: at(0, 5), LastScheduled: ptr(at(10, 0)), Active: true}
	for _, now := range []time.Time{at(11, 0), at(11, 5), at(11, 40)} {
		in.Now = now
		if d := Decide(in); d.CreateNow || !d.ScheduledTime.IsZero() || d.Missed != 0 {
			t.Fatalf("%v, still active: %+v", now, d)
		}
	}
	in.Now, in.Active = at(11, 41), false
	d := Decide(in)
	if !d.CreateNow || !d.ScheduledTime.Equal(at(11, 0)) || d.Missed != 0 {
		t.Fatalf("after the active backup ended: %+v", d)
	}
}
