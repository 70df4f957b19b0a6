package backupctl

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/backupplan"
	"github.com/etcd-steward/steward/internal/fairqueue"
	"github.com/etcd-steward/steward/internal/schedule"
)

// ScheduleReconciler runs EtcdBackupSchedules: it creates one EtcdBackup per due slot and prunes
// old ones; the backups run on their own.
type ScheduleReconciler struct {
	Client client.Client
	// APIReader reads live what the cache does not hold: the streamer's Pods and the key Secrets.
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	Clock     func() time.Time
	// Image returns the Steward image the streamer runs (spec.continuous).
	Image func(ctx context.Context) (string, error)
	// Progress reads a streamer's report (HTTPProgress when nil).
	Progress ReadProgress
	// EtcdImageRepository is where the chain drill's etcd image comes from (the cluster's own).
	EtcdImageRepository string
}

func (r *ScheduleReconciler) now() time.Time {
	if r.Clock != nil {
		return r.Clock()
	}
	return time.Now()
}

// Reconcile decides whether a backup is due, creates it, prunes, and records the schedule's state.
func (r *ScheduleReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var s stewardv1.EtcdBackupSchedule
	if err := r.Client.Get(ctx, req.NamespacedName, &s); err != nil || s.DeletionTimestamp != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	base := s.DeepCopy()
	now := r.now()
	sched, err := schedule.Parse(s.Spec.Schedule)
	if err != nil {
		meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse,
			Reason: "InvalidSchedule", Message: "spec.schedule: " + err.Error(), ObservedGeneration: s.Generation})
		return ctrl.Result{}, r.Client.Status().Patch(ctx, &s, client.MergeFrom(base))
	}
	backups, err := ScheduleBackups(ctx, r.Client, &s)
	if err != nil {
		return ctrl.Result{}, err
	}
	active := ""
	for _, b := range backups {
		if !terminal(b.Status.Phase) {
			active = b.Name
		}
	}
	in := backupplan.ScheduleInput{Schedule: sched, Now: now, Created: s.CreationTimestamp.Time,
		Suspend: s.Spec.Suspend, Active: active != ""}
	if t := s.Status.LastScheduleTime; t != nil {
		in.LastScheduled = &t.Time
	}
	if d := s.Spec.StartingDeadlineSeconds; d != nil {
		in.StartingDeadline = time.Duration(*d) * time.Second
	}
	d := backupplan.Decide(in)
	if d.CreateNow {
		name := backupplan.BackupName(s.Name, d.ScheduledTime)
		if err := r.create(ctx, &s, name); err != nil {
			return ctrl.Result{}, err
		}
		active = name
	}
	if !d.ScheduledTime.IsZero() {
		s.Status.LastScheduleTime = &metav1.Time{Time: d.ScheduledTime}
	}
	s.Status.Missed += int64(d.Missed)
	if err := r.prune(ctx, &s, backups, now); err != nil {
		return ctrl.Result{}, err
	}
	var ec stewardv1.EtcdCluster
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Spec.Template.ClusterName}, &ec); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	wantBase, err := r.reconcileStream(ctx, &s, &ec, backups)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.reconcileDrill(ctx, &s, &ec); err != nil {
		return ctrl.Result{}, err
	}
	if wantBase && active == "" {
		// The streamer lost revisions: a new base now closes the hole (the next slot could be hours away).
		name := backupplan.BackupName(s.Name, now)
		if err := r.create(ctx, &s, name); err != nil {
			return ctrl.Result{}, err
		}
		active = name
		if r.Recorder != nil {
			r.Recorder.Eventf(&s, nil, corev1.EventTypeWarning, "ContinuousBackupHole", "ContinuousBackupHole", "%s; took backup %s as a new base",
				s.Status.Continuous.Hole, name)
		}
	}
	r.summarize(&s, &ec, backups, active, d)
	if err := r.Client.Status().Patch(ctx, &s, client.MergeFrom(base)); err != nil {
		return ctrl.Result{}, err
	}
	after := d.RequeueAfter
	if after <= 0 || after > time.Minute {
		after = time.Minute
	}
	if s.Spec.Continuous != nil && after > streamEvery {
		after = streamEvery
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

func (r *ScheduleReconciler) create(ctx context.Context, s *stewardv1.EtcdBackupSchedule, name string) error {
	b := &stewardv1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: map[string]string{
			stewardv1.LabelSchedule: s.Name, stewardv1.LabelBackupOf: s.Spec.Template.ClusterName}},
		Spec: *s.Spec.Template.DeepCopy(),
	}
	b.Spec.Verify = b.Spec.Verify || s.Spec.Verify
	err := r.Client.Create(ctx, b)
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err == nil && r.Recorder != nil {
		r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, "BackupCreated", "BackupCreated", "created EtcdBackup %s", name)
	}
	return err
}

// prune deletes what retention gives up; the pruned mark makes the backup's finalizer delete its
// object too.
func (r *ScheduleReconciler) prune(ctx context.Context, s *stewardv1.EtcdBackupSchedule, backups []stewardv1.EtcdBackup, now time.Time) error {
	in := backupplan.RetentionInput{Now: now, KeepLast: backupplan.DefaultKeepLast}
	if k := s.Spec.Retention.KeepLast; k != nil {
		in.KeepLast = int(*k)
	}
	if a := s.Spec.Retention.MaxAge; a != nil {
		in.MaxAge = a.Duration
	}
	byName := map[string]*stewardv1.EtcdBackup{}
	for i := range backups {
		b := &backups[i]
		if b.DeletionTimestamp != nil {
			continue
		}
		byName[b.Name] = b
		in.Items = append(in.Items, PlanItem(b))
	}
	for _, name := range backupplan.Prune(in) {
		b := byName[name]
		if b.Annotations[stewardv1.AnnotationPruned] != "true" {
			patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, stewardv1.AnnotationPruned))
			if err := r.Client.Patch(ctx, b, client.RawPatch(types.MergePatchType, patch)); err != nil {
				return client.IgnoreNotFound(err)
			}
		}
		if err := r.Client.Delete(ctx, b); client.IgnoreNotFound(err) != nil {
			return err
		}
		if r.Recorder != nil {
			r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, "BackupPruned", "BackupPruned", "retention deleted EtcdBackup %s", name)
		}
	}
	return nil
}

// summarize records the schedule's state. lastSuccessfulBackup is picked as the cluster's
// status.backup is, among the backups of the cluster as it is now (ec, empty when it does not
// exist): after the cluster is recreated under the same name, the predecessor's backups are still
// kept (and pruned) by the schedule that took them, but no longer named as its last success.
func (r *ScheduleReconciler) summarize(s *stewardv1.EtcdBackupSchedule, ec *stewardv1.EtcdCluster, backups []stewardv1.EtcdBackup, active string, d backupplan.ScheduleDecision) {
	st := &s.Status
	st.Active = active
	st.NextRun = nil
	if !d.NextRun.IsZero() && !s.Spec.Suspend {
		st.NextRun = &metav1.Time{Time: d.NextRun}
	}
	st.Kept, st.LastSuccessfulBackup = 0, nil
	var items []backupplan.Item
	for i := range backups {
		b := &backups[i]
		if b.Status.Phase != stewardv1.BackupSucceeded || b.DeletionTimestamp != nil || b.Annotations[stewardv1.AnnotationPruned] == "true" {
			continue
		}
		st.Kept++
		if Of(b, ec) {
			items = append(items, PlanItem(b))
		}
	}
	if pick, _ := backupplan.LastSuccessful(items); pick != nil {
		for i := range backups {
			if backups[i].Name == pick.Name {
				st.LastSuccessfulBackup = Ref(&backups[i])
			}
		}
	}
	cond := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: d.Reason, Message: d.Message,
		ObservedGeneration: s.Generation}
	if cond.Reason == "" {
		cond.Reason = "Scheduled"
	}
	meta.SetStatusCondition(&st.Conditions, cond)
}

// ScheduleBackups are the backups a schedule created, oldest first.
func ScheduleBackups(ctx context.Context, c client.Reader, s *stewardv1.EtcdBackupSchedule) ([]stewardv1.EtcdBackup, error) {
	var list stewardv1.EtcdBackupList
	if err := c.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingLabels{stewardv1.LabelSchedule: s.Name}); err != nil {
		return nil, err
	}
	slices.SortFunc(list.Items, func(a, b stewardv1.EtcdBackup) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return list.Items, nil
}

func terminal(p stewardv1.BackupPhase) bool {
	return p == stewardv1.BackupSucceeded || p == stewardv1.BackupFailed
}

// SetupWithManager registers the reconciler; a backup's change wakes its schedule.
func (r *ScheduleReconciler) SetupWithManager(mgr ctrl.Manager) error {
	bySchedule := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[stewardv1.LabelSchedule]
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&stewardv1.EtcdBackupSchedule{}).
		Watches(&stewardv1.EtcdBackup{}, bySchedule).
		Named("etcdbackupschedule").
		WithOptions(fairqueue.Options(1)).
		Complete(r)
}
