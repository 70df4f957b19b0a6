// Package backupplan holds the pure decisions of scheduled backups: when an EtcdBackupSchedule
// creates a backup (Decide, BackupName; the schedule itself is parsed by internal/schedule), which
// of its backups to delete (Prune), the cluster's BackupReady condition (Ready) and the phase of
// one EtcdBackup (NextPhase).
//
// Nothing here talks to Kubernetes, reads the wall clock or does I/O: the controller maps the API
// types onto the small input structs, passes the time in, and applies what comes back. The same
// input always gives the same answer.
//
// Choices made here:
//
//   - Time: schedules run in UTC (internal/schedule), so no slot repeats or vanishes with daylight
//     saving. "@every d" slots are counted from the schedule's creation (Created + k*d); d is at
//     least a minute (schedule.MinInterval), so BackupName never gives two slots one name.
//   - One backup at a time (Forbid), deferred rather than skipped: a slot that falls due while a
//     backup is Pending or Running waits for it and runs when it ends, if still within the
//     starting deadline. A backup that runs long delays the next one instead of cancelling it.
//   - Starting deadline: unset (the default), a missed slot may start until the next slot is due,
//     so after an outage the latest slot always runs once: a late backup beats none. A positive
//     StartingDeadline gives slots up earlier; they are counted as missed.
//   - Suspension gives due slots up (recorded as handled, not counted as missed; RequeueAfter
//     still wakes the controller at each slot): resuming does not start a backup for a slot that
//     fell due while suspended; the next slot runs.
//   - Failed backups: the failures since the newest success are kept (the newest KeepLast of
//     them), whatever their age; the newest failure is kept even after a later success until it
//     is older than MaxAge; every other Failed backup is deleted.
//   - NoBackupYet is True: a schedule younger than twice its interval with nothing succeeded yet
//     is not overdue and must not page. It turns False (BackupStale) once the first backup is
//     overdue, or BackupFailed as soon as a backup fails.
//   - Staleness: schedule.Interval is the longer of the gap containing a moment and the gap
//     before it, so an irregular schedule ("0 9,17 * * 1-5") is not stale over the weekend nor
//     while Monday's first backup runs.
package backupplan

import (
	"fmt"
	"time"
)

// BackupName is the name of the backup a schedule creates for a slot: "<schedule>-<unix minutes>",
// as Kubernetes names a CronJob's Jobs. The same slot always gives the same name, so an operator that
// crashes between creating the backup and recording the slot finds it (AlreadyExists) instead of
// creating a second one.
func BackupName(schedule string, slot time.Time) string {
	return fmt.Sprintf("%s-%d", schedule, slot.Unix()/60)
}
