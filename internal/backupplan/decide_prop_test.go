package backupplan

import (
	"math/rand/v2"
	"testing"
	"time"
)

var propSpecs = []string{"@hourly", "@daily", "*/7 * * * *", "0 9,17 * * 1-5", "30 2 * * *", "@every 10m", "@every 95m", "0 0 1 * *"}

// randomInput is a schedule input over a few days, with a few seconds of jitter everywhere.
func randomInput(t testing.TB, r *rand.Rand) ScheduleInput {
	in := ScheduleInput{
		Schedule: mustParse(t, propSpecs[r.IntN(len(propSpecs))]),
		Created:  monday.Add(time.Duration(r.Int64N(int64(3 * day)))).Truncate(time.Second),
		Suspend:  r.IntN(5) == 0,
		Active:   r.IntN(3) == 0,
	}
	in.Now = in.Created.Add(time.Duration(r.Int64N(int64(5 * day))))
	if r.IntN(3) > 0 {
		in.LastScheduled = ptr(in.Created.Add(time.Duration(r.Int64N(int64(in.Now.Sub(in.Created)) + 1))))
		if slot, ok := in.Schedule.Latest(in.Created, in.Created, *in.LastScheduled); ok && r.IntN(2) == 0 {
			in.LastScheduled = &slot // usually a real slot, as the controller records them
		}
	}
	if r.IntN(2) == 0 {
		in.StartingDeadline = time.Duration(r.Int64N(int64(3 * time.Hour)))
	}
	return in
}

// TestDecideProperties checks random inputs against walking every slot, and that recording a
// decision settles its slot: Decide twice in a row never runs twice.
func TestDecideProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		in := randomInput(t, r)
		d := Decide(in)
		after := in.Created
		if in.LastScheduled != nil && in.LastScheduled.After(after) {
			after = *in.LastScheduled
		}
		slots := bruteSlots(in.Schedule, in.Created, after, in.Now)
		fail := func(what string) {
			var last time.Time
			if len(slots) > 0 {
				last = slots[len(slots)-1]
			}
			t.Fatalf("case %d: %s\ninput %+v (last %v)\ndecision %+v\n%d slots due, the latest %v", i, what, in, in.LastScheduled, d, len(slots), last)
		}
		if d != Decide(in) {
			fail("not deterministic")
		}
		if d.NextRun.IsZero() || !d.NextRun.After(in.Now) || !d.NextRun.Equal(in.Schedule.Next(in.Created, in.Now)) {
			fail("NextRun is not the first slot after now")
		}
		if d.RequeueAfter <= 0 || d.RequeueAfter > d.NextRun.Sub(in.Now) {
			fail("RequeueAfter is not positive and at most NextRun")
		}
		if d.CreateNow && d.ScheduledTime.IsZero() {
			fail("CreateNow without a slot")
		}
		switch {
		case len(slots) == 0:
			if !d.ScheduledTime.IsZero() || d.Missed != 0 {
				fail("acted with no slot due")
			}
		case in.Suspend:
			if d.CreateNow || !d.ScheduledTime.Equal(slots[len(slots)-1]) || d.Missed != 0 {
				fail("suspended: want the latest slot given up, none missed")
			}
		case d.CreateNow:
			if in.Active || !d.ScheduledTime.Equal(slots[len(slots)-1]) || d.Missed != min(len(slots)-1, MissedLimit) {
				fail("want a run for the latest slot, the others missed, nothing active")
			}
		case !d.ScheduledTime.IsZero():
			if in.StartingDeadline <= 0 || in.Now.Sub(d.ScheduledTime) <= in.StartingDeadline || d.Missed != min(len(slots), MissedLimit) {
				fail("a slot given up within its deadline, or missed miscounted")
			}
		default:
			if !in.Active || d.Reason != ReasonBackupActive {
				fail("a due slot neither run nor settled without an active backup")
			}
		}
		if !d.ScheduledTime.IsZero() {
			in.LastScheduled, in.Active = ptr(d.ScheduledTime), false
			if again := Decide(in); !again.ScheduledTime.IsZero() || again.CreateNow || again.Missed != 0 {
				t.Fatalf("case %d: the recorded slot %v acted on again: %+v", i, d.ScheduledTime, again)
			}
		}
	}
}

// TestDecideLoop runs a controller against Decide for four days with a minute's tick: backups of
// a given length, never two at once, never two for one slot, and every slot either run or deferred
// into a later one.
func TestDecideLoop(t *testing.T) {
	tests := []struct {
		spec     string
		length   time.Duration
		deadline time.Duration
		want     int // backups created
	}{
		{"@hourly", 10 * time.Minute, 0, 96},
		{"@hourly", 70 * time.Minute, 0, 83}, // back to back, each deferred slot runs when the last ends
		{"@hourly", 70 * time.Minute, 5 * time.Minute, 48},
		{"*/30 * * * *", 5 * time.Minute, 0, 192},
		{"@every 45m", 5 * time.Minute, 0, 127}, // the 128th slot is 4 days after creation, past the end
		{"0 3 * * *", 2 * time.Hour, 0, 4},
	}
	for _, tt := range tests {
		created := at(0, 0).Add(-time.Second)
		in := ScheduleInput{Schedule: mustParse(t, tt.spec), Created: created, StartingDeadline: tt.deadline}
		names := map[string]bool{}
		var running time.Time // start of the active backup, zero when none
		missed := 0
		for now := created; now.Before(created.Add(4 * day)); now = now.Add(time.Minute) {
			if !running.IsZero() && !now.Before(running.Add(tt.length)) {
				running = time.Time{}
			}
			in.Now, in.Active = now, !running.IsZero()
			d := Decide(in)
			if d.CreateNow {
				if in.Active {
					t.Fatalf("%s: a second backup at %v", tt.spec, now)
				}
				name := BackupName("s", d.ScheduledTime)
				if names[name] {
					t.Fatalf("%s: %s created twice", tt.spec, name)
				}
				names[name], running = true, now
			}
			missed += d.Missed
			if !d.ScheduledTime.IsZero() {
				in.LastScheduled = ptr(d.ScheduledTime)
			}
		}
		if len(names) != tt.want {
			t.Errorf("%s, backups of %v, deadline %v: %d backups (%d missed), want %d", tt.spec, tt.length, tt.deadline, len(names), missed, tt.want)
		}
	}
}

// BenchmarkDecideYearOutage: a year of every-minute slots missed is decided without walking them
// all (MissedLimit bounds the count).
func BenchmarkDecideYearOutage(b *testing.B) {
	in := ScheduleInput{Schedule: mustParse(b, "* * * * *"), Created: at(-366*24, 0), LastScheduled: ptr(at(-365*24, 0)), Now: at(0, 0)}
	for b.Loop() {
		Decide(in)
	}
}
