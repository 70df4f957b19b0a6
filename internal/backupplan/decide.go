package backupplan

import (
	"fmt"
	"time"

	"github.com/etcd-steward/steward/internal/schedule"
)

// Reasons a ScheduleDecision gives (CamelCase, for Events and the schedule's status).
const (
	// ReasonScheduled: a backup is created now for ScheduledTime.
	ReasonScheduled = "Scheduled"
	// ReasonWaitingForNextRun: no slot is due; the next is NextRun.
	ReasonWaitingForNextRun = "WaitingForNextRun"
	// ReasonSuspended: the schedule is suspended; due slots are given up, not run later.
	ReasonSuspended = "Suspended"
	// ReasonBackupActive: a slot is due but a backup of this schedule is still Pending or Running
	// (concurrency is forbidden); the slot waits for it while within the starting deadline.
	ReasonBackupActive = "BackupActive"
	// ReasonMissedStartingDeadline: the latest due slot is later than the starting deadline allows; it is
	// given up and counted as missed.
	ReasonMissedStartingDeadline = "MissedStartingDeadline"
	// ReasonNoSchedule: the input holds no parsed schedule.
	ReasonNoSchedule = "NoSchedule"
)

// MissedLimit caps ScheduleDecision.Missed: after a long outage of an every-minute schedule the
// count is "at least MissedLimit", not an exact figure worth walking a year of slots for.
const MissedLimit = 1000

// ScheduleInput is what Decide needs to know about one EtcdBackupSchedule.
type ScheduleInput struct {
	Schedule schedule.Schedule // from schedule.Parse
	Now      time.Time
	// Created is the schedule's creation time: no slot at or before it ever runs, and "@every"
	// slots are counted from it (Created + k*every, k >= 1).
	Created time.Time
	// LastScheduled is status.lastScheduleTime: the last slot a decision settled (ScheduledTime).
	LastScheduled *time.Time
	Suspend       bool
	// Active: a backup of this schedule is Pending or Running. Concurrency is always forbidden.
	Active bool
	// StartingDeadline is how late a due slot may still start. Zero or less (the default): until
	// the next slot is due, so the latest missed slot always runs once, however late; a late
	// backup beats none.
	StartingDeadline time.Duration
}

// ScheduleDecision is what to do for a schedule now.
//
// The caller creates BackupName(schedule, ScheduledTime) when CreateNow (AlreadyExists counts as
// done), then records a non-zero ScheduledTime as status.lastScheduleTime whether or not a backup
// was created: a slot is settled once, so Decide never runs or counts it again.
type ScheduleDecision struct {
	// CreateNow: create the backup for ScheduledTime.
	CreateNow bool
	// ScheduledTime is the slot this decision settles: the slot the new backup is for, or one
	// given up (suspended, too late). Zero when nothing is settled.
	ScheduledTime time.Time
	// Missed is how many slots this decision skips without a backup (never those skipped while
	// suspended; at most MissedLimit).
	Missed int
	// NextRun is the first slot after now (zero if the schedule fires no more), reported while
	// suspended too.
	NextRun time.Time
	// RequeueAfter is when to decide again: the next slot, or sooner, when a deferred slot's
	// starting deadline runs out. Zero: no timed requeue.
	RequeueAfter time.Duration
	Reason       string
	Message      string
}

// Decide applies the schedule: at most one backup per decision, for the latest slot due since
// max(Created, LastScheduled); earlier slots are missed. Suspended, due slots are given up. While a
// backup is active the latest slot waits (Forbid, deferred rather than skipped: a backup that runs
// long delays the next instead of cancelling it) and runs when the active one ends, if still within
// StartingDeadline. The same input always gives the same decision, and once ScheduledTime is
// recorded as LastScheduled the slot is never acted on again.
func Decide(in ScheduleInput) ScheduleDecision {
	if in.Schedule.IsZero() {
		return ScheduleDecision{Reason: ReasonNoSchedule, Message: "no valid schedule"}
	}
	now := in.Now.UTC()
	after := in.Created.UTC()
	if in.LastScheduled != nil && in.LastScheduled.After(after) {
		after = in.LastScheduled.UTC()
	}
	var d ScheduleDecision
	d.NextRun = in.Schedule.Next(in.Created, later(now, after))
	if !d.NextRun.IsZero() {
		d.RequeueAfter = d.NextRun.Sub(now)
	}
	slot, due := in.Schedule.Latest(in.Created, after, now)
	if !due {
		d.Reason, d.Message = ReasonWaitingForNextRun, "next backup at "+stamp(d.NextRun)
		if d.NextRun.IsZero() {
			d.Message = "the schedule has no slot in the next five years"
		}
		if in.Suspend {
			d.Reason, d.Message = ReasonSuspended, "suspended; next slot "+stamp(d.NextRun)
		}
		return d
	}
	n := in.Schedule.Count(in.Created, after, slot, MissedLimit+2)
	late := in.StartingDeadline > 0 && now.Sub(slot) > in.StartingDeadline
	switch {
	case in.Suspend:
		d.ScheduledTime = slot
		d.Reason = ReasonSuspended
		d.Message = fmt.Sprintf("suspended: slot %s skipped; next slot %s", stamp(slot), stamp(d.NextRun))
	case late:
		d.ScheduledTime, d.Missed = slot, min(n, MissedLimit)
		d.Reason = ReasonMissedStartingDeadline
		d.Message = fmt.Sprintf("slot %s is %s late, past the starting deadline of %s", stamp(slot), age(now.Sub(slot)), age(in.StartingDeadline))
		if in.Active {
			d.Message += ", while a backup was still running"
		}
		d.Message += missed(n)
	case in.Active:
		d.Reason = ReasonBackupActive
		d.Message = fmt.Sprintf("slot %s waits for the running backup", stamp(slot))
		if in.StartingDeadline > 0 {
			d.Message += fmt.Sprintf(" until %s", stamp(slot.Add(in.StartingDeadline)))
			expiry := slot.Add(in.StartingDeadline).Sub(now) + time.Second
			if d.RequeueAfter == 0 || expiry < d.RequeueAfter {
				d.RequeueAfter = expiry
			}
		}
	default:
		d.CreateNow, d.ScheduledTime, d.Missed = true, slot, min(n-1, MissedLimit)
		d.Reason = ReasonScheduled
		d.Message = "backup for slot " + stamp(slot) + missed(n-1)
	}
	return d
}

func missed(n int) string {
	switch {
	case n <= 0:
		return ""
	case n > MissedLimit:
		return fmt.Sprintf("; more than %d slots missed", MissedLimit)
	case n == 1:
		return "; 1 slot missed"
	}
	return fmt.Sprintf("; %d slots missed", n)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format("2006-01-02T15:04:05Z")
}
