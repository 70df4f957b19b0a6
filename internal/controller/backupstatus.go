package controller

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/backupctl"
	"github.com/etcd-steward/steward/internal/backupplan"
	"github.com/etcd-steward/steward/internal/schedule"
)

// ConditionBackupReady says whether a scheduled cluster has a fresh, good backup.
const ConditionBackupReady = backupplan.ConditionBackupReady

// setBackupStatus records the cluster's last successful backup and, when a schedule targets the
// cluster, BackupReady: False when the last backup failed, failed verification, or the newest
// success is older than twice the schedule's interval. Only backups bound to this cluster's UID
// count: a cluster recreated under the same name never inherits its predecessor's, and backups
// that record no UID (Unbound) count for none.
func (r *EtcdClusterReconciler) setBackupStatus(ctx context.Context, ec *stewardv1.EtcdCluster) error {
	var backups stewardv1.EtcdBackupList
	if err := r.Client.List(ctx, &backups, client.InNamespace(ec.Namespace)); err != nil {
		return err
	}
	var schedules stewardv1.EtcdBackupScheduleList
	if err := r.Client.List(ctx, &schedules, client.InNamespace(ec.Namespace)); err != nil {
		return err
	}
	// newest success, the verified one preferred over it (if any), and whatever finished last
	var newest, newestVerified, lastDone *stewardv1.EtcdBackup
	byName := map[string]*stewardv1.EtcdBackup{}
	var items []backupplan.Item
	for i := range backups.Items {
		b := &backups.Items[i]
		if !backupctl.Of(b, ec) || b.Status.CompletionTime == nil || b.DeletionTimestamp != nil {
			continue
		}
		byName[b.Name] = b
		items = append(items, backupctl.PlanItem(b))
		if lastDone == nil || b.Status.CompletionTime.After(lastDone.Status.CompletionTime.Time) {
			lastDone = b
		}
	}
	ec.Status.Backup = nil
	if pick, unverified := backupplan.LastSuccessful(items); pick != nil {
		// pick prefers a verified backup; when it was preferred over a newer one, that one is
		// still what BackupReady ages and reports the drill of.
		newest = byName[pick.Name]
		ec.Status.Backup = &stewardv1.BackupSummary{LastSuccessfulBackup: backupctl.Ref(newest)}
		if unverified != nil {
			newestVerified, newest = newest, byName[unverified.Name]
			ec.Status.Backup.NewerUnverified = backupctl.Ref(newest)
		}
	}
	var sched *stewardv1.EtcdBackupSchedule
	for i := range schedules.Items {
		s := &schedules.Items[i]
		if s.Spec.Template.ClusterName != ec.Name || s.Spec.Suspend || s.DeletionTimestamp != nil {
			continue
		}
		if sched == nil {
			sched = s
		}
		if c := s.Status.Continuous; s.Spec.Continuous != nil && c != nil {
			if ec.Status.Backup == nil {
				ec.Status.Backup = &stewardv1.BackupSummary{}
			}
			ec.Status.Backup.Continuous = &stewardv1.ContinuousSummary{Schedule: s.Name, DurableRevision: c.DurableRevision,
				DurableTime: c.DurableTime, LagRevisions: c.LagRevisions, ReportedAt: c.ReportedAt, LastDrill: c.LastDrill}
		}
	}
	if sched == nil {
		meta.RemoveStatusCondition(&ec.Status.Conditions, ConditionBackupReady)
		return nil
	}
	parsed, err := schedule.Parse(sched.Spec.Schedule)
	if err != nil {
		meta.SetStatusCondition(&ec.Status.Conditions, metav1.Condition{Type: ConditionBackupReady, Status: metav1.ConditionFalse,
			Reason: "InvalidSchedule", Message: "EtcdBackupSchedule " + sched.Name + ": " + err.Error(), ObservedGeneration: ec.Generation})
		return nil
	}
	now := r.now()
	in := backupplan.ReadyInput{Now: now, Interval: schedule.Interval(parsed, now), ScheduleCreated: sched.CreationTimestamp.Time,
		Verify: sched.Spec.Verify}
	if newest != nil {
		in.NewestSuccess = &backupplan.Success{Name: newest.Name, Completed: newest.Status.CompletionTime.Time, Revision: newest.Status.Revision}
		if v := newest.Status.Verification; v != nil && v.Time != nil {
			in.Verification = &backupplan.Verification{Verified: v.Verified, Message: v.Message}
		}
	}
	if newestVerified != nil {
		in.NewestVerified = &backupplan.Success{Name: newestVerified.Name, Completed: newestVerified.Status.CompletionTime.Time,
			Revision: newestVerified.Status.Revision}
	}
	if lastDone != nil {
		in.LastFinished = &backupplan.Finished{Name: lastDone.Name, Phase: backupplan.Phase(lastDone.Status.Phase),
			Message: lastDone.Status.Message, Completed: lastDone.Status.CompletionTime.Time}
	}
	ok, reason, msg := backupplan.Ready(in)
	status := metav1.ConditionTrue
	if !ok {
		status = metav1.ConditionFalse
	}
	meta.SetStatusCondition(&ec.Status.Conditions, metav1.Condition{Type: ConditionBackupReady, Status: status,
		Reason: reason, Message: msg, ObservedGeneration: ec.Generation})
	return nil
}

// byBackupCluster maps a backup or schedule to the cluster it is about.
func byBackupCluster(_ context.Context, o client.Object) []reconcile.Request {
	name := ""
	switch v := o.(type) {
	case *stewardv1.EtcdBackup:
		name = v.Spec.ClusterName
	case *stewardv1.EtcdBackupSchedule:
		name = v.Spec.Template.ClusterName
	}
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}
