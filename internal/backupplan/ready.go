package backupplan

import (
	"fmt"
	"time"
)

// ConditionBackupReady is the EtcdCluster condition Ready computes.
const ConditionBackupReady = "BackupReady"

// Reasons of the BackupReady condition.
const (
	// ReasonBackupSucceeded (True): the newest success is recent and, if verification is on, not
	// known to be bad.
	ReasonBackupSucceeded = "BackupSucceeded"
	// ReasonNoBackupYet (True): nothing has succeeded yet, but the schedule is younger than twice
	// its interval, so nothing is overdue. True so that a brand-new schedule does not page; it
	// turns False (BackupStale) once the first backup is overdue, or BackupFailed at once if the
	// first backup fails.
	ReasonNoBackupYet = "NoBackupYet"
	// ReasonBackupFailed (False): the backup that finished last failed.
	ReasonBackupFailed = "BackupFailed"
	// ReasonVerificationFailed (False): the newest success failed verification.
	ReasonVerificationFailed = "VerificationFailed"
	// ReasonBackupStale (False): the newest success is older than twice the interval, or none
	// exists and the schedule is older than that.
	ReasonBackupStale = "BackupStale"
)

// Success is the newest successful backup.
type Success struct {
	Name      string
	Completed time.Time
	Revision  int64 // the etcd revision the snapshot holds
}

// Finished is the backup that finished last, successfully or not.
type Finished struct {
	Name      string
	Phase     Phase // Succeeded or Failed
	Message   string
	Completed time.Time
}

// Verification is the result of verifying the newest success.
type Verification struct {
	Verified bool
	Message  string
}

// ReadyInput is what the BackupReady condition is computed from.
type ReadyInput struct {
	Now time.Time
	// Interval is the schedule's interval (Interval); zero turns staleness off (no schedule).
	Interval time.Duration
	// ScheduleCreated dates a schedule that has no success yet.
	ScheduleCreated time.Time
	NewestSuccess   *Success  // nil: none
	LastFinished    *Finished // nil: none
	// Verify: verification is enabled. Verification is the newest success's result, nil while
	// it is not verified yet (which is not a failure).
	Verify       bool
	Verification *Verification
	// NewestVerified is the newest success whose drill passed when it is not NewestSuccess (nil:
	// none, or NewestSuccess is verified). Named while the newest is unverified, so whoever reads
	// the condition knows which backup is known to restore.
	NewestVerified *Success
}

// Ready computes BackupReady. The first match decides: the last finished backup failed
// (BackupFailed), the newest success failed verification (VerificationFailed), the newest success
// is older than twice the interval or none exists and the schedule is (BackupStale), nothing has
// succeeded yet (NoBackupYet, True), else BackupSucceeded. Messages name the backup and its age.
func Ready(in ReadyInput) (ok bool, reason, message string) {
	stale := 2 * in.Interval
	s, f := in.NewestSuccess, in.LastFinished
	if f != nil && f.Phase == PhaseFailed {
		msg := "backup " + f.Name + " failed"
		if !f.Completed.IsZero() {
			msg += " " + age(in.Now.Sub(f.Completed)) + " ago"
		}
		if f.Message != "" {
			msg += ": " + f.Message
		}
		if s != nil {
			msg += fmt.Sprintf("; newest success %s", described(in.Now, s))
		}
		return false, ReasonBackupFailed, msg
	}
	if s != nil && in.Verify && in.Verification != nil && !in.Verification.Verified {
		msg := fmt.Sprintf("backup %s failed verification", described(in.Now, s))
		if in.Verification.Message != "" {
			msg += ": " + in.Verification.Message
		}
		return false, ReasonVerificationFailed, msg + in.verifiedFallback()
	}
	if s == nil {
		since := in.Now.Sub(in.ScheduleCreated)
		if in.Interval > 0 && since > stale {
			return false, ReasonBackupStale, fmt.Sprintf("no backup has succeeded since the schedule was created %s ago (it runs every %s)", age(since), age(in.Interval))
		}
		return true, ReasonNoBackupYet, fmt.Sprintf("no backup has succeeded yet; the schedule was created %s ago", age(since))
	}
	if in.Interval > 0 && in.Now.Sub(s.Completed) > stale {
		return false, ReasonBackupStale, fmt.Sprintf("newest backup %s, more than twice the schedule's interval of %s", described(in.Now, s), age(in.Interval))
	}
	msg := "newest backup " + described(in.Now, s)
	switch {
	case in.Verify && in.Verification == nil:
		msg += "; verification pending" + in.verifiedFallback()
	case in.Verify:
		msg += "; verified"
	}
	return true, ReasonBackupSucceeded, msg
}

// verifiedFallback names the backup known to restore while the newest is not verified.
func (in ReadyInput) verifiedFallback() string {
	if in.NewestVerified == nil {
		return "; no backup has passed verification yet"
	}
	return "; newest verified backup " + described(in.Now, in.NewestVerified)
}

// described names a success, its revision and its age.
func described(now time.Time, s *Success) string {
	return fmt.Sprintf("%s (revision %d) completed %s ago", s.Name, s.Revision, age(now.Sub(s.Completed)))
}

// age prints a duration the way people say it: 45s, 12m, 3h5m, 2d4h.
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 24*time.Hour:
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m)
	}
	days, h := int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour)
	if h == 0 {
		return fmt.Sprintf("%dd", days)
	}
	return fmt.Sprintf("%dd%dh", days, h)
}
