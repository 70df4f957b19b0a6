package controller

import (
	"context"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
)

// withDataCheck makes the member's etcd start through the data check (internal/datacheck): the ID
// its data must carry once etcd assigned one, and whether it must have data already (a voter whose
// PVC existed before this Pod). Without an image lookup at all (r.Image nil: tests only) etcd starts
// directly, as it did before the check existed.
func (r *EtcdClusterReconciler) withDataCheck(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed, m *stewardv1.EtcdMember,
	member *resources.Member) error {
	if r.Image == nil {
		return nil
	}
	image, err := r.Image(ctx)
	if err != nil {
		// Fail closed: a Pod started now would run etcd unchecked and is never rebuilt for it.
		return err
	}
	member.ToolsImage = image
	member.ToolsFromImage = r.ToolsFromImage != nil && r.ToolsFromImage(ctx)
	member.Bootstrap.MemberID = m.Status.ID
	pvcBefore := o.pvcs[resources.PVCName(m.Name)] != nil
	member.Bootstrap.ExpectData = m.Status.Phase == stewardv1.MemberRunning && pvcBefore &&
		ec.Spec.Storage.Medium != stewardv1.StorageMediumMemory
	return nil
}

// imageHold is Facts.ImageHold: why no member Pod may start now, "" when the image is known (or
// not looked up, in tests). The plan holds every Pod start and disruption while it is set.
func (r *EtcdClusterReconciler) imageHold(ctx context.Context) string {
	if r.Image == nil {
		return ""
	}
	if _, err := r.Image(ctx); err != nil {
		return "the Steward image is unknown, so no member Pod can start etcd through the data check: " + err.Error()
	}
	return ""
}
