package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/plan"
	"github.com/etcd-steward/steward/internal/resources"
)

// setRecoveryStatus writes the plan's view of quorum loss (since when, by which operator process,
// the recovery plan) next to the controller's own records (the recovery in progress, the last one).
func setRecoveryStatus(s *stewardv1.EtcdClusterStatus, d plan.Decision) {
	qr := s.QuorumRecovery
	if qr == nil {
		qr = &stewardv1.QuorumRecoveryStatus{}
	}
	s.NodeLoss = d.NodeLoss
	qr.LostSince, qr.Observer, qr.Plan = d.LostSince, d.LostObserver, d.RecoveryPlan
	if qr.LostSince == nil && qr.Plan == nil && qr.InProgress == nil && qr.Last == nil {
		qr = nil
	}
	s.QuorumRecovery = qr
}

// applyRecovery carries out the recovery's bookkeeping actions. The stage is written to status at
// the end of this reconcile, before the next one acts on it (intent first).
func (r *EtcdClusterReconciler) applyRecovery(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed, a plan.Action) error {
	if ec.Status.QuorumRecovery == nil {
		ec.Status.QuorumRecovery = &stewardv1.QuorumRecoveryStatus{}
	}
	qr := ec.Status.QuorumRecovery
	switch a.Kind {
	case plan.StartRecovery:
		qr.InProgress = a.Recovery.DeepCopy()
	case plan.RecoveryStep:
		if qr.InProgress == nil {
			return errors.New("no quorum recovery in progress")
		}
		qr.InProgress.Stage, qr.InProgress.Since = a.Stage, metav1.NewTime(r.now())
		if a.Stage == stewardv1.RecoveryReseeding {
			// The old cluster is gone (every member fenced and dropped): the restored seed forms a
			// new one, whose ID is latched anew, and the restore is recorded anew.
			ec.Status.ClusterID, ec.Status.Restore = "", nil
		}
	case plan.DiscardMember:
		return r.discardMember(ctx, ec, o, a.Member)
	case plan.FinishRecovery, plan.AbortRecovery:
		outcome := stewardv1.RecoveryRecovered
		if a.Kind == plan.AbortRecovery {
			outcome = stewardv1.RecoveryAborted
		}
		if p := qr.InProgress; p != nil {
			qr.Last = &stewardv1.QuorumRecoveryRecord{Time: metav1.NewTime(r.now()), Survivor: p.Survivor, RestoreFrom: p.RestoreFrom,
				Revision: p.Revision, Trigger: p.Trigger, Discarded: p.Discarded, Outcome: outcome, Message: a.Message}
		}
		qr.InProgress = nil
		return r.dropRecoverAnnotation(ctx, ec, "")
	}
	return nil
}

// dropRecoverAnnotation removes the recover-quorum annotations (the trigger and its confirmation),
// so a trigger that ended, was refused or was not needed cannot fire on the next blip. why, when
// set, goes into a Warning Event. The patch goes through a copy: the API server's answer carries
// the stored status, which must not overwrite what this reconcile is about to write.
func (r *EtcdClusterReconciler) dropRecoverAnnotation(ctx context.Context, ec *stewardv1.EtcdCluster, why string) error {
	_, trigger := ec.Annotations[stewardv1.AnnotationRecoverQuorum]
	_, confirm := ec.Annotations[stewardv1.AnnotationRecoverQuorumConfirm]
	if !trigger && !confirm {
		return nil
	}
	patch := []byte(`{"metadata":{"annotations":{"` + stewardv1.AnnotationRecoverQuorum + `":null,"` +
		stewardv1.AnnotationRecoverQuorumConfirm + `":null}}}`)
	patched := ec.DeepCopy()
	if err := r.Client.Patch(ctx, patched, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("removing the %s annotation: %w", stewardv1.AnnotationRecoverQuorum, err)
	}
	// The status written next is based on this version: a locked intent write must not conflict
	// with this reconcile's own annotation change.
	ec.ResourceVersion = patched.ResourceVersion
	delete(ec.Annotations, stewardv1.AnnotationRecoverQuorum)
	delete(ec.Annotations, stewardv1.AnnotationRecoverQuorumConfirm)
	if why != "" {
		r.event(ec, corev1.EventTypeWarning, "QuorumRecoveryAnnotationRemoved", "%s; the annotation was removed", why)
	}
	return nil
}

// discardMember drops a member the recovery left behind: its PVC is detached from the cluster and
// kept (labelled with where it came from); its Pod is already fenced; the EtcdMember goes.
func (r *EtcdClusterReconciler) discardMember(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed, name string) error {
	m := o.members[name]
	if m == nil {
		return nil
	}
	if pvc := o.pvcs[resources.PVCName(name)]; pvc != nil {
		base := pvc.DeepCopy()
		delete(pvc.Labels, stewardv1.LabelCluster)
		pvc.Labels[stewardv1.LabelDiscardedFrom] = ec.Name
		pvc.Labels[stewardv1.LabelDiscardedOrdinal] = strconv.Itoa(int(m.Spec.Ordinal))
		delete(pvc.Annotations, stewardv1.AnnotationClusterUID)
		if pvc.Annotations == nil {
			pvc.Annotations = map[string]string{}
		}
		pvc.Annotations[stewardv1.AnnotationDiscardedAt] = r.now().UTC().Format("2006-01-02T15:04:05Z")
		pvc.OwnerReferences = nil
		if err := r.Client.Patch(ctx, pvc, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("detaching %s's PVC: %w", name, err)
		}
	}
	if controllerutil.ContainsFinalizer(m, stewardv1.FinalizerMember) {
		if err := r.removeFinalizer(ctx, m); err != nil {
			return err
		}
	}
	return client.IgnoreNotFound(r.Client.Delete(ctx, m))
}

// reservedOrdinals are the ordinals of PVCs a recovery detached from this cluster: a new member
// taking one would find the stale PVC under its name.
func reservedOrdinals(ctx context.Context, kube client.Reader, ec *stewardv1.EtcdCluster) ([]int32, error) {
	var pvcs corev1.PersistentVolumeClaimList
	if err := kube.List(ctx, &pvcs, client.InNamespace(ec.Namespace), client.MatchingLabels{stewardv1.LabelDiscardedFrom: ec.Name}); err != nil {
		return nil, err
	}
	var out []int32
	for _, p := range pvcs.Items {
		if n, err := strconv.Atoi(p.Labels[stewardv1.LabelDiscardedOrdinal]); err == nil {
			out = append(out, int32(n))
		}
	}
	return out, nil
}
