package backupctl

import (
	"context"
	"errors"
	"math"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/backupjob"
	"github.com/etcd-steward/steward/internal/backupkey"
	"github.com/etcd-steward/steward/internal/resources"
)

// finalize deletes the backup's objects when it should, then lets the EtcdBackup go. A delete
// that keeps failing is reported and given up: the object stays, the EtcdBackup does not block
// its namespace forever.
func (r *BackupReconciler) finalize(ctx context.Context, b *stewardv1.EtcdBackup) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(b, stewardv1.FinalizerBackup) {
		return ctrl.Result{}, nil
	}
	deleteObject := b.Spec.DeletionPolicy == stewardv1.DeletionDelete || b.Annotations[stewardv1.AnnotationPruned] == "true"
	if deleteObject && b.Status.Key != "" && b.Status.Phase == stewardv1.BackupSucceeded {
		image, err := r.Image(ctx)
		if err != nil {
			return ctrl.Result{}, err
		}
		j := r.jobBase(b, image, b.Status.Key)
		j.Name = backupjob.JobName(b.Name, backupjob.TaskDelete)
		out, err := r.jobOutcome(ctx, b.Namespace, j.Name)
		if err != nil {
			return ctrl.Result{}, err
		}
		switch {
		case out.missing:
			if err := r.Client.Create(ctx, backupjob.DeleteJob(j)); err != nil && !apierrors.IsAlreadyExists(err) {
				return ctrl.Result{}, err
			}
			return ctrl.Result{RequeueAfter: poll}, nil
		case out.failed != "":
			r.event(b, corev1.EventTypeWarning, "BackupObjectLeft", "could not delete %s (%s); it is left in place", b.Status.Location, out.failed)
		case !out.done:
			return ctrl.Result{RequeueAfter: poll}, nil
		default:
			r.event(b, corev1.EventTypeNormal, "BackupObjectDeleted", "deleted %s", b.Status.Location)
		}
	}
	base := b.DeepCopy()
	controllerutil.RemoveFinalizer(b, stewardv1.FinalizerBackup)
	return ctrl.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, b, client.MergeFrom(base)))
}

// verify runs the restore drill once for a Succeeded backup and records its result.
func (r *BackupReconciler) verify(ctx context.Context, b *stewardv1.EtcdBackup) (ctrl.Result, error) {
	name := backupjob.JobName(b.Name, backupjob.TaskVerify)
	out, err := r.jobOutcome(ctx, b.Namespace, name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if out.missing {
		if _, err := backupkey.Check(ctx, r.APIReader, b.Namespace, b.Spec.Destination); err != nil {
			var problem *backupkey.Problem
			if !errors.As(err, &problem) {
				return ctrl.Result{}, err
			}
			base := b.DeepCopy()
			now := metav1.NewTime(r.now())
			b.Status.Verification = &stewardv1.BackupVerification{Time: &now, Message: problem.Error() + ": the drill cannot open the backup"}
			r.event(b, corev1.EventTypeWarning, "BackupVerificationFailed", "%s", b.Status.Verification.Message)
			return ctrl.Result{}, r.Client.Status().Patch(ctx, b, client.MergeFrom(base))
		}
		image, err := r.Image(ctx)
		if err != nil {
			return ctrl.Result{}, err
		}
		j := r.jobBase(b, image, b.Status.Key)
		j.Name = name
		job := backupjob.VerifyJob(j, r.etcdImage(ctx, b), b.Status.SHA256, 1_000_000_000)
		if err := r.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: poll}, nil
	}
	if !out.done && out.failed == "" {
		return ctrl.Result{RequeueAfter: poll}, nil
	}
	base := b.DeepCopy()
	now := metav1.NewTime(r.now())
	v := &stewardv1.BackupVerification{Time: &now}
	if out.failed != "" {
		v.Message = out.failed
	} else if res, err := parseResult(out.message); err != nil {
		v.Message = "the restore drill's result cannot be read: " + err.Error()
	} else {
		v.Verified, v.Revision, v.Message = res.Verified, res.Revision, res.Message
		v.DurationSeconds = int64(math.Round(res.DurationSeconds))
	}
	b.Status.Verification = v
	if v.Verified {
		r.event(b, corev1.EventTypeNormal, "BackupVerified", "restored into a throwaway etcd: revision %d in %ds", v.Revision, v.DurationSeconds)
	} else {
		r.event(b, corev1.EventTypeWarning, "BackupVerificationFailed", "%s", v.Message)
	}
	return ctrl.Result{}, r.Client.Status().Patch(ctx, b, client.MergeFrom(base))
}

// etcdImage is the image the drill restores with: the cluster's own (etcdutl of the version the
// cluster runs), or the backup's version from the default repository once the cluster is gone (or
// is a successor of the same name, which may run another version).
func (r *BackupReconciler) etcdImage(ctx context.Context, b *stewardv1.EtcdBackup) string {
	var ec stewardv1.EtcdCluster
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterName}, &ec)
	if err == nil && (b.Status.ClusterUID == "" || b.Status.ClusterUID == ec.UID) {
		t := ec.Spec.MemberTemplate
		if ec.Status.Observed != nil {
			t = *ec.Status.Observed
		}
		return resources.Image(&t, r.EtcdImageRepository)
	}
	return resources.Image(&stewardv1.MemberTemplate{Version: b.Status.EtcdVersion}, r.EtcdImageRepository)
}
