package schedule

import (
	"strings"
	"testing"
	"time"
)

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		spec string
		from time.Time
		next time.Time // the first slot after from
	}{
		{"0 3 * * *", at(11, 20), at(27, 0)},
		{"*/15 * * * *", at(11, 20), at(11, 30)},
		{"0 9-17 * * MON-FRI", at(17, 30), at(33, 0)},
		{"0 9 * * 1-5", monday.Add(4*day + 10*time.Hour), monday.Add(7*day + 9*time.Hour)}, // Friday → Monday
		{"30 4 1,15 * *", monday, time.Date(2026, 3, 15, 4, 30, 0, 0, time.UTC)},
		{"0 0 29 2 *", monday, time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC)},
		{"@hourly", at(11, 20), at(12, 0)},
		{"@daily", at(11, 20), at(24, 0)},
		{"@midnight", at(11, 20), at(24, 0)},
		{"@weekly", at(11, 20), monday.Add(6 * day)}, // Sunday 00:00
		{"@monthly", at(11, 20), time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)},
		{"@yearly", at(11, 20), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"@annually", at(11, 20), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"  @hourly  ", at(11, 20), at(12, 0)},
		{"@every 10m", at(11, 20), at(11, 30)}, // anchored at from in this table
		{"@every 1h30m", at(11, 20), at(12, 50)},
		{"@every 90s", at(11, 20), atS(11, 21, 30)},
	}
	for _, tt := range tests {
		s, err := Parse(tt.spec)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.spec, err)
			continue
		}
		if s.String() != tt.spec || s.IsZero() {
			t.Errorf("Parse(%q): String %q, IsZero %v", tt.spec, s.String(), s.IsZero())
		}
		if got := s.Next(tt.from, tt.from); !got.Equal(tt.next) || got.Location() != time.UTC {
			t.Errorf("%q after %v: next %v, want %v UTC", tt.spec, tt.from, got, tt.next)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	tests := []struct{ spec, want string }{
		{"", "schedule is empty"},
		{"   ", "schedule is empty"},
		{"0 0 3 * * *", "6 fields: a seconds field is not supported"},
		{"* * *", `has 3 fields; standard cron has 5`},
		{"* * * * * * *", "has 7 fields"},
		{"70 * * * *", `the minute field "70" is invalid: end of range (70) above maximum (59)`},
		{"*/0 * * * *", `the minute field "*/0" is invalid`},
		{"0 25 * * *", `the hour field "25" is invalid`},
		{"0 0 32 * *", `the day-of-month field "32" is invalid`},
		{"0 0 0 * *", `the day-of-month field "0" is invalid`},
		{"0 0 1 13 *", `the month field "13" is invalid`},
		{"0 0 * * 8", `the day-of-week field "8" is invalid`},
		{"0 0 * * FUNDAY", `the day-of-week field "FUNDAY" is invalid`},
		{"0 0 * JANUARY *", `the month field "JANUARY" is invalid`},
		{"5-1 * * * *", `the minute field "5-1" is invalid`},
		{"0 0 30 2 *", "never fires"},
		{"0 0 31 4,6,9,11 *", "never fires"},
		{"@often", "unknown descriptor; use @yearly"},
		{"@reboot", "unknown descriptor"},
		{"@every", "@every needs a duration"},
		{"@every soon", "@every needs a duration"},
		{"@everyday", "@every needs a duration"},
		{"@every 30s", "at least 1m0s"},
		{"@every -1h", "at least 1m0s"},
		{"@every 90500ms", "whole number of seconds"},
		{"TZ=Europe/Berlin 0 3 * * *", "time zones are not supported; schedules run in UTC"},
		{"CRON_TZ=UTC @hourly", "time zones are not supported"},
		{"TZ=UTC", "time zones are not supported"}, // robfig v3.0.1 panics on this one
	}
	for _, tt := range tests {
		s, err := Parse(tt.spec)
		if err == nil {
			t.Errorf("Parse(%q) accepted", tt.spec)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q): %q, want it to say %q", tt.spec, err, tt.want)
		}
		if tt.spec != "" && strings.TrimSpace(tt.spec) != "" && !strings.Contains(err.Error(), tt.spec) {
			t.Errorf("Parse(%q): %q does not quote the schedule", tt.spec, err)
		}
		if !s.IsZero() {
			t.Errorf("Parse(%q) returned a schedule with its error", tt.spec)
		}
	}
}

func TestInterval(t *testing.T) {
	weekdays := "0 9,17 * * 1-5"
	tests := []struct {
		spec   string
		around time.Time
		want   time.Duration
	}{
		{"@hourly", at(11, 20), time.Hour},
		{"*/15 * * * *", at(11, 20), 15 * time.Minute},
		{"@every 10m", at(11, 20), 10 * time.Minute},
		{"@every 36h", at(11, 20), 36 * time.Hour},
		{"@daily", at(11, 20), day},
		{"0 3 * * *", at(3, 0), day},
		// Twice a weekday: over the weekend the gap is Friday 17:00 → Monday 09:00.
		{weekdays, monday.Add(5*day + 12*time.Hour), 64 * time.Hour},
		// Monday 09:30, while Monday's first backup runs: the weekend gap still counts.
		{weekdays, at(9, 30), 64 * time.Hour},
		// Tuesday 10:00: Monday 17:00 → Tuesday 09:00 is the longest gap nearby.
		{weekdays, at(24+10, 0), 16 * time.Hour},
		{weekdays, at(48+12, 0), 16 * time.Hour},
		// @monthly in March: February (28 days) and March (31 days) around it.
		{"@monthly", time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC), 31 * day},
		{"0 0 29 2 *", monday, time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC).Sub(time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC))},
		{"", monday, 0},
	}
	for _, tt := range tests {
		var s Schedule
		if tt.spec != "" {
			s = mustParse(t, tt.spec)
		}
		if got := Interval(s, tt.around); got != tt.want {
			t.Errorf("Interval(%q, %v) = %v, want %v", tt.spec, tt.around, got, tt.want)
		}
	}
}

// TestSlotsUTC: schedules run in UTC. Times given in other zones are the same instants; a day
// on which Europe and the US change their clocks has exactly 24 hourly slots and one 02:30 slot.
func TestSlotsUTC(t *testing.T) {
	eastern := time.FixedZone("UTC-5", -5*3600)
	s := mustParse(t, "0 11 * * *")
	// 06:10 at UTC-5 is 11:10 UTC: the 11:00 UTC slot has passed.
	if got, _ := s.Latest(monday, monday, time.Date(2026, 3, 2, 6, 10, 0, 0, eastern)); !got.Equal(at(11, 0)) {
		t.Errorf("latest slot = %v, want 11:00 UTC", got)
	}
	for _, d := range []time.Time{
		time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC),  // US: 02:00 local skipped
		time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC), // EU: 02:00 local skipped
		time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), // US: 01:00 local repeated
	} {
		end := d.Add(day).Add(-time.Second)
		if n := len(bruteSlots(mustParse(t, "@hourly"), d, d.Add(-time.Second), end)); n != 24 {
			t.Errorf("%v: %d hourly slots, want 24", d.Format("2006-01-02"), n)
		}
		if n := len(bruteSlots(mustParse(t, "30 2 * * *"), d, d.Add(-time.Second), end)); n != 1 {
			t.Errorf("%v: %d 02:30 slots, want 1", d.Format("2006-01-02"), n)
		}
	}
}

// TestLatestAndCount checks the shortcuts backupplan.Decide uses against walking every slot.
func TestLatestAndCount(t *testing.T) {
	specs := []string{"@hourly", "*/7 * * * *", "* 9 * * *", "0 9,17 * * 1-5", "@every 25m", "@every 3h", "0 0 1 * *"}
	anchor := atS(0, 3, 27)
	for _, spec := range specs {
		s := mustParse(t, spec)
		for _, span := range []time.Duration{0, time.Minute, 59 * time.Minute, 3 * time.Hour, 50 * time.Hour, 9 * day, 70 * day} {
			after, now := at(10, 0), at(10, 0).Add(span)
			want := bruteSlots(s, anchor, after, now)
			got, ok := s.Latest(anchor, after, now)
			if ok != (len(want) > 0) || ok && !got.Equal(want[len(want)-1]) {
				t.Errorf("%q over %v: latest %v %v, want %d slots ending %v", spec, span, got, ok, len(want), want)
				continue
			}
			if ok {
				if n := s.Count(anchor, after, got, 1<<30); n != len(want) {
					t.Errorf("%q over %v: count %d, want %d", spec, span, n, len(want))
				}
				if n := s.Count(anchor, after, got, 3); n != min(3, len(want)) {
					t.Errorf("%q over %v: count limited to 3 = %d", spec, span, n)
				}
			}
		}
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

func mustParse(t testing.TB, spec string) Schedule {
	t.Helper()
	s, err := Parse(spec)
	if err != nil {
		t.Fatalf("Parse(%q): %v", spec, err)
	}
	return s
}

// bruteSlots lists every slot in (after, now] by walking the schedule one slot at a time: the
// oracle Latest and Count are checked against.
func bruteSlots(s Schedule, anchor, after, now time.Time) []time.Time {
	var out []time.Time
	for x := s.Next(anchor, after); !x.IsZero() && !x.After(now); x = s.Next(anchor, x) {
		out = append(out, x)
	}
	return out
}
