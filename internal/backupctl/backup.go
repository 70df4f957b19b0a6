// Package backupctl holds the EtcdBackup and EtcdBackupSchedule reconcilers. A backup is a Job
// running the Steward image (internal/backupjob): the snapshot streams from a member to storage
// without passing through the operator, and the Job's result comes back as its termination
// message. Scheduling and retention decisions are internal/backupplan's.
package backupctl

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/backupjob"
	"github.com/etcd-steward/steward/internal/backupkey"
	"github.com/etcd-steward/steward/internal/fairqueue"
	"github.com/etcd-steward/steward/internal/resources"
)

const poll = 5 * time.Second

// BackupReconciler runs EtcdBackups.
type BackupReconciler struct {
	Client client.Client
	// APIReader reads what the cache does not hold: the Jobs' Pods and the encryption key Secrets.
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	// Image returns the Steward image the Jobs run.
	Image func(ctx context.Context) (string, error)
	// EtcdImageRepository is used for the restore drill's etcd when the cluster sets no image.
	EtcdImageRepository string
	Clock               func() time.Time
}

// The backup controller's permissions.
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdbackups;etcdbackupschedules,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdbackups/status;etcdbackupschedules/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdbackups/finalizers;etcdbackupschedules/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete

func (r *BackupReconciler) now() time.Time {
	if r.Clock != nil {
		return r.Clock()
	}
	return time.Now()
}

// Reconcile moves one backup one step.
func (r *BackupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var b stewardv1.EtcdBackup
	if err := r.Client.Get(ctx, req.NamespacedName, &b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if b.DeletionTimestamp != nil {
		return r.finalize(ctx, &b)
	}
	if !controllerutil.ContainsFinalizer(&b, stewardv1.FinalizerBackup) {
		base := b.DeepCopy()
		controllerutil.AddFinalizer(&b, stewardv1.FinalizerBackup)
		if err := r.Client.Patch(ctx, &b, client.MergeFrom(base)); err != nil {
			return ctrl.Result{}, err
		}
	}
	switch b.Status.Phase {
	case "", stewardv1.BackupPending:
		return r.start(ctx, &b)
	case stewardv1.BackupRunning:
		return r.follow(ctx, &b)
	}
	if b.Status.ClusterUID == "" {
		if err := r.bindLegacy(ctx, &b); err != nil {
			return ctrl.Result{}, err
		}
	}
	if b.Status.Phase == stewardv1.BackupSucceeded && b.Spec.Verify && (b.Status.Verification == nil || b.Status.Verification.Time == nil) {
		return r.verify(ctx, &b)
	}
	return ctrl.Result{}, nil
}

// start checks the cluster can be backed up now and creates the Job. The Job is created before
// Running is recorded: its name is fixed, so a crash in between finds it again.
func (r *BackupReconciler) start(ctx context.Context, b *stewardv1.EtcdBackup) (ctrl.Result, error) {
	var ec stewardv1.EtcdCluster
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterName}, &ec)
	if apierrors.IsNotFound(err) {
		return r.fail(ctx, b, "EtcdCluster %q does not exist in namespace %q", b.Spec.ClusterName, b.Namespace)
	} else if err != nil {
		return ctrl.Result{}, err
	}
	switch b.Status.ClusterUID {
	case "":
		if err := r.recordCluster(ctx, b, &ec); err != nil {
			return ctrl.Result{}, err
		}
	case ec.UID:
	default:
		return r.fail(ctx, b, "EtcdCluster %s was deleted and recreated (uid %s) while this backup of uid %s waited", ec.Name, ec.UID, b.Status.ClusterUID)
	}
	if c := meta.FindStatusCondition(ec.Status.Conditions, "Available"); c == nil || c.Status != metav1.ConditionTrue {
		why := "it has not formed yet"
		if c != nil {
			why = c.Reason + ": " + c.Message
		}
		return r.fail(ctx, b, "cluster %s is not available (%s); a snapshot needs a quorum", ec.Name, why)
	}
	if other, err := r.running(ctx, b); err != nil {
		return ctrl.Result{}, err
	} else if other != "" {
		return r.pending(ctx, b, "waiting for backup %s of the same cluster to finish (one at a time)", other)
	}
	member, ok := Source(&ec)
	if !ok {
		return r.fail(ctx, b, "cluster %s has no healthy member to stream a snapshot from", ec.Name)
	}
	if _, err := backupkey.Check(ctx, r.APIReader, b.Namespace, b.Spec.Destination); err != nil {
		var problem *backupkey.Problem
		if errors.As(err, &problem) {
			return r.fail(ctx, b, "%v: nothing was written", problem)
		}
		return ctrl.Result{}, err
	}
	image, err := r.Image(ctx)
	if err != nil {
		return r.fail(ctx, b, "no Steward image for the backup Job: %v", err)
	}
	key := backupjob.SnapshotKey(b.Spec.Destination, b.Namespace, ec.Name, b.Name, b.Spec.Compression)
	var tls *backupjob.EtcdTLS
	if ec.TLSEnabled() {
		secret, err := JobClientSecret(ctx, r.Client, &ec)
		if err != nil {
			return ctrl.Result{}, err
		}
		tls = &backupjob.EtcdTLS{SecretName: secret}
	}
	job := backupjob.SaveJob(r.jobBase(b, image, key), resources.ClientURL(&ec, member), tls, b.Spec.Compression)
	if err := r.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, err
	}
	base := b.DeepCopy()
	now := metav1.NewTime(r.now())
	b.Status.Phase, b.Status.StartTime, b.Status.Member = stewardv1.BackupRunning, &now, member
	b.Status.Key, b.Status.Location = key, backupjob.Location(b.Spec.Destination, key)
	b.Status.Compression = b.Spec.Compression
	b.Status.Message = "streaming a snapshot from " + member
	r.event(b, corev1.EventTypeNormal, "BackupStarted", "streaming a snapshot of %s from %s to %s", ec.Name, member, b.Status.Location)
	return ctrl.Result{RequeueAfter: poll}, r.Client.Status().Patch(ctx, b, client.MergeFrom(base))
}

// follow waits for the Job and records its result.
func (r *BackupReconciler) follow(ctx context.Context, b *stewardv1.EtcdBackup) (ctrl.Result, error) {
	out, err := r.jobOutcome(ctx, b.Namespace, backupjob.JobName(b.Name, backupjob.TaskSave))
	if err != nil {
		return ctrl.Result{}, err
	}
	switch {
	case out.missing:
		return r.fail(ctx, b, "the backup Job %s disappeared before it finished", backupjob.JobName(b.Name, backupjob.TaskSave))
	case out.failed != "":
		return r.fail(ctx, b, "%s", out.failed)
	case !out.done:
		return ctrl.Result{RequeueAfter: poll}, nil
	}
	res, err := parseResult(out.message)
	if err != nil {
		return r.fail(ctx, b, "the backup Job finished but its result cannot be read: %v", err)
	}
	base := b.DeepCopy()
	now := metav1.NewTime(r.now())
	res.fill(&b.Status)
	b.Status.Phase, b.Status.CompletionTime = stewardv1.BackupSucceeded, &now
	b.Status.Message = fmt.Sprintf("snapshot at revision %d, %d bytes", b.Status.Revision, b.Status.Size)
	r.event(b, corev1.EventTypeNormal, "BackupSucceeded", "%s: revision %d, %d bytes, sha256 %s",
		b.Status.Location, b.Status.Revision, b.Status.Size, b.Status.SHA256)
	return ctrl.Result{}, r.Client.Status().Patch(ctx, b, client.MergeFrom(base))
}

func (r *BackupReconciler) pending(ctx context.Context, b *stewardv1.EtcdBackup, format string, args ...any) (ctrl.Result, error) {
	base := b.DeepCopy()
	b.Status.Phase, b.Status.Message = stewardv1.BackupPending, fmt.Sprintf(format, args...)
	return ctrl.Result{RequeueAfter: poll}, r.Client.Status().Patch(ctx, b, client.MergeFrom(base))
}

// fail ends the backup. Failed is final: a schedule's next run (or a new EtcdBackup) retries.
func (r *BackupReconciler) fail(ctx context.Context, b *stewardv1.EtcdBackup, format string, args ...any) (ctrl.Result, error) {
	base := b.DeepCopy()
	now := metav1.NewTime(r.now())
	b.Status.Phase, b.Status.CompletionTime = stewardv1.BackupFailed, &now
	b.Status.Message = fmt.Sprintf(format, args...)
	r.event(b, corev1.EventTypeWarning, "BackupFailed", "%s", b.Status.Message)
	return ctrl.Result{}, r.Client.Status().Patch(ctx, b, client.MergeFrom(base))
}

// running names another backup of the same cluster that is in flight.
func (r *BackupReconciler) running(ctx context.Context, b *stewardv1.EtcdBackup) (string, error) {
	var list stewardv1.EtcdBackupList
	if err := r.Client.List(ctx, &list, client.InNamespace(b.Namespace)); err != nil {
		return "", err
	}
	for _, o := range list.Items {
		if o.Name != b.Name && o.Spec.ClusterName == b.Spec.ClusterName && o.Status.Phase == stewardv1.BackupRunning {
			return o.Name, nil
		}
	}
	return "", nil
}

func (r *BackupReconciler) jobBase(b *stewardv1.EtcdBackup, image, key string) backupjob.Job {
	return backupjob.Job{
		Name: backupjob.JobName(b.Name, backupjob.TaskSave), Namespace: b.Namespace, Backup: b.Name,
		Cluster: b.Spec.ClusterName, Image: image, Storage: b.Spec.Destination, Key: key,
		Owner: metav1.NewControllerRef(b, stewardv1.GroupVersion.WithKind("EtcdBackup")),
	}
}

func (r *BackupReconciler) event(b *stewardv1.EtcdBackup, kind, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(b, nil, kind, reason, reason, format, args...)
	}
}

// SetupWithManager registers the reconciler; it owns its Jobs.
func (r *BackupReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&stewardv1.EtcdBackup{}).
		Owns(&batchv1.Job{}).
		Named("etcdbackup").
		WithOptions(fairqueue.Options(1)).
		Complete(r)
}
