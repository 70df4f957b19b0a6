package main

// The resizer: what an external-resizer sidecar does for a CSI driver. The controller-manager's
// expand controller hands claims of volumes it cannot grow itself (a `local` volume is not an
// expandable in-tree plugin) to the resizer the claim's annotation names; this one grows ours
// online and records the new size on the PV, then on the claim's status, so the claim needs no
// Pod restart (no FileSystemResizePending).

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

type resizer struct {
	client  kubernetes.Interface
	baseDir string
}

// run polls the claims every two seconds: a handful of volumes, no informer needed.
func (r *resizer) run(ctx context.Context) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.pass(ctx)
		}
	}
}

func (r *resizer) pass(ctx context.Context) {
	pvcs, err := r.client.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		klog.Errorf("listing claims: %v", err)
		return
	}
	for i := range pvcs.Items {
		pvc := &pvcs.Items[i]
		want, ok := pvc.Spec.Resources.Requests[v1.ResourceStorage]
		if !ok || pvc.Status.Phase != v1.ClaimBound || pvc.Spec.VolumeName == "" {
			continue
		}
		if have := pvc.Status.Capacity[v1.ResourceStorage]; want.Cmp(have) <= 0 {
			continue
		}
		if err := r.grow(ctx, pvc); err != nil {
			klog.Errorf("growing %s/%s: %v", pvc.Namespace, pvc.Name, err)
		}
	}
}

func (r *resizer) grow(ctx context.Context, pvc *v1.PersistentVolumeClaim) error {
	want := pvc.Spec.Resources.Requests[v1.ResourceStorage]
	pv, err := r.client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || !isXFSVolume(pv) || !inside(r.baseDir, pv.Spec.Local.Path) {
		return err
	}
	if have := pv.Spec.Capacity[v1.ResourceStorage]; want.Cmp(have) > 0 {
		if err := growXFS(ctx, pv.Spec.Local.Path, want); err != nil {
			return err
		}
		pv.Spec.Capacity = v1.ResourceList{v1.ResourceStorage: want}
		if _, err := r.client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
			return err
		}
		klog.Infof("grew %s (%s/%s) to %s", pv.Name, pvc.Namespace, pvc.Name, want.String())
	}
	pvc = pvc.DeepCopy()
	pvc.Status.Capacity = v1.ResourceList{v1.ResourceStorage: want}
	pvc.Status.Conditions = nil
	pvc.Status.AllocatedResources = v1.ResourceList{v1.ResourceStorage: want}
	pvc.Status.AllocatedResourceStatuses = nil
	_, err = r.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
	return err
}
