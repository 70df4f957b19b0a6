package backupctl

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/backupplan"
)

// Of says whether a backup belongs to this EtcdCluster: by the UID it recorded, never by name, so
// a cluster recreated under the same name sees none of its predecessor's backups, and a cluster
// reseeded after a quorum loss (new etcd cluster ID, same EtcdCluster) keeps its own.
func Of(b *stewardv1.EtcdBackup, ec *stewardv1.EtcdCluster) bool {
	return b.Status.ClusterUID != "" && b.Status.ClusterUID == ec.UID && b.Spec.ClusterName == ec.Name
}

// PlanItem is a backup as backupplan's retention and LastSuccessful see it.
func PlanItem(b *stewardv1.EtcdBackup) backupplan.Item {
	it := backupplan.Item{Name: b.Name, Phase: backupplan.Phase(b.Status.Phase), Created: b.CreationTimestamp.Time}
	if b.Status.CompletionTime != nil {
		it.Completed = b.Status.CompletionTime.Time
	}
	if b.Spec.Verify {
		it.Drill = backupplan.DrillPending
		if v := b.Status.Verification; v != nil && v.Time != nil {
			it.Drill = backupplan.DrillFailed
			if v.Verified {
				it.Drill = backupplan.DrillPassed
			}
		}
	}
	return it
}

// Ref is the status reference to a backup.
func Ref(b *stewardv1.EtcdBackup) *stewardv1.BackupRef {
	return &stewardv1.BackupRef{Name: b.Name, Time: b.Status.CompletionTime, Revision: b.Status.Revision,
		Verified: b.Status.Verification != nil && b.Status.Verification.Verified}
}

// recordCluster binds a backup about to start to the EtcdCluster it resolved, before the Job
// exists: the UID is what the cluster later recognises its backups by.
func (r *BackupReconciler) recordCluster(ctx context.Context, b *stewardv1.EtcdBackup, ec *stewardv1.EtcdCluster) error {
	base := b.DeepCopy()
	b.Status.ClusterUID = ec.UID
	setBound(b, backupplan.Bind(backupplan.BindInput{RecordedUID: string(ec.UID)}))
	return r.Client.Status().Patch(ctx, b, client.MergeFrom(base))
}

// bindLegacy settles a finished backup that records no cluster UID (taken before Steward recorded
// one, or failed before it resolved its cluster): adopted by the current cluster of its name only
// with proof (backupplan.Bind), otherwise marked Unbound so nobody mistakes it for the cluster's.
func (r *BackupReconciler) bindLegacy(ctx context.Context, b *stewardv1.EtcdBackup) error {
	in := backupplan.BindInput{BackupCreated: b.CreationTimestamp.Time, BackupClusterID: b.Status.ClusterID}
	var ec stewardv1.EtcdCluster
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterName}, &ec)
	switch {
	case err == nil && ec.DeletionTimestamp == nil:
		in.Cluster = &backupplan.BindCluster{UID: string(ec.UID), Created: ec.CreationTimestamp.Time, ClusterID: ec.Status.ClusterID}
	case err != nil && !apierrors.IsNotFound(err):
		return err
	}
	base := b.DeepCopy()
	bind := backupplan.Bind(in)
	b.Status.ClusterUID = ec.UID
	if !bind.Bound {
		b.Status.ClusterUID = ""
	}
	if !setBound(b, bind) && b.Status.ClusterUID == base.Status.ClusterUID {
		return nil
	}
	if bind.Bound {
		r.event(b, corev1.EventTypeNormal, "BackupAdopted", "%s", bind.Message)
	}
	return r.Client.Status().Patch(ctx, b, client.MergeFrom(base))
}

func setBound(b *stewardv1.EtcdBackup, bind backupplan.Binding) bool {
	status := metav1.ConditionFalse
	if bind.Bound {
		status = metav1.ConditionTrue
	}
	return meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: stewardv1.ConditionBound, Status: status,
		Reason: bind.Reason, Message: bind.Message, ObservedGeneration: b.Generation})
}
