package backupplan

import (
	"strings"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/schedule"
)

func TestReady(t *testing.T) {
	now := at(12, 0)
	success := func(ago time.Duration) *Success {
		return &Success{Name: "nightly-29540000", Completed: now.Add(-ago), Revision: 4211}
	}
	verified := &Success{Name: "nightly-29539880", Completed: now.Add(-3 * time.Hour), Revision: 4100}
	finished := func(phase Phase, ago time.Duration, msg string) *Finished {
		return &Finished{Name: "nightly-29540060", Phase: phase, Message: msg, Completed: now.Add(-ago)}
	}
	tests := []struct {
		name    string
		in      ReadyInput
		ok      bool
		reason  string
		message string
	}{
		{name: "a new schedule does not page",
			in: ReadyInput{Interval: time.Hour, ScheduleCreated: now.Add(-30 * time.Minute)},
			ok: true, reason: ReasonNoBackupYet, message: "no backup has succeeded yet; the schedule was created 30m ago"},
		{name: "a new schedule at twice its interval exactly",
			in: ReadyInput{Interval: time.Hour, ScheduleCreated: now.Add(-2 * time.Hour)},
			ok: true, reason: ReasonNoBackupYet},
		{name: "nothing succeeded past twice the interval",
			in: ReadyInput{Interval: time.Hour, ScheduleCreated: now.Add(-3 * time.Hour)},
			ok: false, reason: ReasonBackupStale, message: "no backup has succeeded since the schedule was created 3h ago (it runs every 1h)"},
		{name: "the first backup failed: pages at once",
			in: ReadyInput{Interval: day, ScheduleCreated: now.Add(-time.Hour), LastFinished: finished(PhaseFailed, 5*time.Minute, "etcdserver: request timed out")},
			ok: false, reason: ReasonBackupFailed, message: "backup nightly-29540060 failed 5m ago: etcdserver: request timed out"},
		{name: "the last backup failed though an older one is fresh",
			in: ReadyInput{Interval: time.Hour, NewestSuccess: success(65 * time.Minute), LastFinished: finished(PhaseFailed, 4*time.Minute, "")},
			ok: false, reason: ReasonBackupFailed, message: "backup nightly-29540060 failed 4m ago; newest success nightly-29540000 (revision 4211) completed 1h5m ago"},
		{name: "a failure without a completion time",
			in: ReadyInput{Interval: time.Hour, LastFinished: &Finished{Name: "b", Phase: PhaseFailed, Message: "the backup Job disappeared"}},
			ok: false, reason: ReasonBackupFailed, message: "backup b failed: the backup Job disappeared"},
		{name: "fresh success",
			in: ReadyInput{Interval: time.Hour, NewestSuccess: success(30 * time.Minute), LastFinished: finished(PhaseSucceeded, 30*time.Minute, "")},
			ok: true, reason: ReasonBackupSucceeded, message: "newest backup nightly-29540000 (revision 4211) completed 30m ago"},
		{name: "success at twice the interval exactly is not stale",
			in: ReadyInput{Interval: time.Hour, NewestSuccess: success(2 * time.Hour)},
			ok: true, reason: ReasonBackupSucceeded},
		{name: "stale success",
			in: ReadyInput{Interval: time.Hour, NewestSuccess: success(150 * time.Minute)},
			ok: false, reason: ReasonBackupStale, message: "newest backup nightly-29540000 (revision 4211) completed 2h30m ago, more than twice the schedule's interval of 1h"},
		{name: "stale daily success, in days",
			in: ReadyInput{Interval: day, NewestSuccess: success(3*day + 4*time.Hour)},
			ok: false, reason: ReasonBackupStale, message: "completed 3d4h ago, more than twice the schedule's interval of 1d"},
		{name: "no interval: never stale",
			in: ReadyInput{NewestSuccess: success(400 * day)},
			ok: true, reason: ReasonBackupSucceeded},
		{name: "no interval, nothing yet",
			in: ReadyInput{ScheduleCreated: now.Add(-400 * day)},
			ok: true, reason: ReasonNoBackupYet},
		{name: "verification failed",
			in: ReadyInput{Interval: time.Hour, NewestSuccess: success(10 * time.Minute), Verify: true, Verification: &Verification{Message: "hash mismatch"}},
			ok: false, reason: ReasonVerificationFailed, message: "backup nightly-29540000 (revision 4211) completed 10m ago failed verification: hash mismatch"},
		{name: "verification pending is no failure",
			in: ReadyInput{Interval: time.Hour, NewestSuccess: success(time.Minute), Verify: true},
			ok: true, reason: ReasonBackupSucceeded, message: "completed 1m ago; verification pending"},
		{name: "verified",
			in: ReadyInput{Interval: time.Hour, NewestSuccess: success(time.Minute), Verify: true, Verification: &Verification{Verified: true}},
			ok: true, reason: ReasonBackupSucceeded, message: "; verified"},
		// Issue 23: with verification on, say which backup is known to restore when the newest
		// is not (yet) verified.
		{name: "verification pending names the newest verified backup",
			in: ReadyInput{Interval: time.Hour, NewestSuccess: success(time.Minute), Verify: true, NewestVerified: verified},
			ok: true, reason: ReasonBackupSucceeded,
			message: "completed 1m ago; verification pending; newest verified backup nightly-29539880 (revision 4100) completed 3h ago"},
		{name: "verification pending and nothing verified yet",
			in: ReadyInput{Interval: time.Hour, NewestSuccess: success(time.Minute), Verify: true},
			ok: true, reason: ReasonBackupSucceeded, message: "verification pending; no backup has passed verification yet"},
		{name: "verification failed names the newest verified backup",
			in: ReadyInput{Interval: time.Hour, NewestSuccess: success(10 * time.Minute), Verify: true, NewestVerified: verified,
				Verification: &Verification{Message: "hash mismatch"}},
			ok: false, reason: ReasonVerificationFailed,
			message: "failed verification: hash mismatch; newest verified backup nightly-29539880 (revision 4100) completed 3h ago"},
		{name: "verification failed and nothing ever verified",
			in: ReadyInput{Interval: time.Hour, NewestSuccess: success(10 * time.Minute), Verify: true, Verification: &Verification{}},
			ok: false, reason: ReasonVerificationFailed, message: "failed verification; no backup has passed verification yet"},
		{name: "a verified newest names no other",
			in: ReadyInput{Interval: time.Hour, NewestSuccess: success(time.Minute), Verify: true, Verification: &Verification{Verified: true}},
			ok: true, reason: ReasonBackupSucceeded, message: "completed 1m ago; verified"},
		{name: "verification off: a stale result is ignored",
			in: ReadyInput{Interval: time.Hour, NewestSuccess: success(time.Minute), Verification: &Verification{Message: "hash mismatch"}},
			ok: true, reason: ReasonBackupSucceeded},
		{name: "a failed backup outranks a failed verification",
			in: ReadyInput{Interval: time.Hour, NewestSuccess: success(time.Hour), LastFinished: finished(PhaseFailed, time.Minute, "x"),
				Verify: true, Verification: &Verification{Message: "hash mismatch"}},
			ok: false, reason: ReasonBackupFailed},
		{name: "a failed verification outranks staleness",
			in: ReadyInput{Interval: time.Hour, NewestSuccess: success(5 * time.Hour), Verify: true, Verification: &Verification{Message: "hash mismatch"}},
			ok: false, reason: ReasonVerificationFailed},
		{name: "a failed backup outranks staleness",
			in: ReadyInput{Interval: time.Hour, NewestSuccess: success(5 * time.Hour), LastFinished: finished(PhaseFailed, time.Minute, "")},
			ok: false, reason: ReasonBackupFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now = now
			ok, reason, message := Ready(tt.in)
			if ok != tt.ok || reason != tt.reason || !strings.Contains(message, tt.message) {
				t.Errorf("Ready = %v %s %q, want %v %s %q", ok, reason, message, tt.ok, tt.reason, tt.message)
			}
		})
	}
}

// TestReadyOverWeekend: with Interval, a twice-a-weekday schedule is not stale over the weekend
// nor while Monday's first backup runs, and is once a weekday's slots were missed.
func TestReadyOverWeekend(t *testing.T) {
	s := mustParse(t, "0 9,17 * * 1-5")
	friday := &Success{Name: "fri", Completed: at(-3*24+17, 10)} // Friday 17:10, before monday
	for _, tt := range []struct {
		now time.Time
		ok  bool
	}{
		{at(-24+12, 0), true}, // Sunday noon
		{at(9, 30), true},     // Monday 09:30, the first backup of the week running
		{at(24+10, 0), false}, // Tuesday 10:00: Monday's and Tuesday's backups missing
	} {
		ok, reason, msg := Ready(ReadyInput{Now: tt.now, Interval: schedule.Interval(s, tt.now), NewestSuccess: friday})
		if ok != tt.ok {
			t.Errorf("%v: %v %s %q, want ok %v", tt.now, ok, reason, msg, tt.ok)
		}
	}
}

func TestAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:                          "0s",
		0:                                     "0s",
		59*time.Second + 900*time.Millisecond: "59s",
		time.Minute:                           "1m",
		59*time.Minute + 59*time.Second:       "59m",
		time.Hour:                             "1h",
		90 * time.Minute:                      "1h30m",
		day:                                   "1d",
		day + 90*time.Minute:                  "1d1h",
		400 * day:                             "400d",
	} {
		if got := age(d); got != want {
			t.Errorf("age(%v) = %q, want %q", d, got, want)
		}
	}
}
