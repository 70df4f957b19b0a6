package controller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/log"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
)

// withDataCheck makes the member's etcd start through the data check (internal/datacheck): the ID
// its data must carry once etcd assigned one, and whether it must have data already (a voter whose
// PVC existed before this Pod). Without the Steward image (tests without an image) etcd starts
// directly, as it did before the check existed.
func (r *EtcdClusterReconciler) withDataCheck(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed, m *stewardv1.EtcdMember,
	member *resources.Member) {
	if r.Image == nil {
		return
	}
	image, err := r.Image(ctx)
	if err != nil {
		log.FromContext(ctx).Error(err, "starting etcd without the data check: the Steward image is unknown", "member", m.Name)
		return
	}
	member.ToolsImage = image
	member.Bootstrap.MemberID = m.Status.ID
	pvcBefore := o.pvcs[resources.PVCName(m.Name)] != nil
	member.Bootstrap.ExpectData = m.Status.Phase == stewardv1.MemberRunning && pvcBefore &&
		ec.Spec.Storage.Medium != stewardv1.StorageMediumMemory
}
