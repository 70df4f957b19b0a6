package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/plan"
	"github.com/etcd-steward/steward/internal/resources"
)

// +kubebuilder:rbac:groups="",resources=pods/resize,verbs=patch

// resizeFacts reads the in-place resize state of the etcd container.
func resizeFacts(p *corev1.Pod) plan.Resize {
	var out plan.Resize
	for _, c := range p.Spec.Containers {
		if c.Name == "etcd" {
			out.Spec = *c.Resources.DeepCopy()
		}
	}
	out.Refused = p.Annotations[stewardv1.AnnotationResizeRefused]
	busy := false
	for _, c := range p.Status.Conditions {
		switch c.Type {
		case corev1.PodResizePending:
			if c.Status == corev1.ConditionTrue {
				busy, out.Pending, out.PendingSince = true, c.Reason, c.LastTransitionTime.Time
			}
		case corev1.PodResizeInProgress:
			busy = busy || c.Status == corev1.ConditionTrue
		}
	}
	// The kubelet has seen the latest spec (a resize bumps the generation) and reports the
	// container's resources as the spec asks.
	seen := p.Status.ObservedGeneration >= p.Generation
	applied := false
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "etcd" && cs.Resources != nil {
			applied = equality.Semantic.DeepEqual(cs.Resources.Requests, out.Spec.Requests) &&
				equality.Semantic.DeepEqual(cs.Resources.Limits, out.Spec.Limits)
		}
	}
	out.Applied = seen && !busy && applied
	return out
}

// resizePod asks the kubelet to give the running etcd container the observed resources. A resize
// the API server refuses (a QoS change it would not allow, say) is recorded on the Pod, so the
// planner rolls the member instead of asking again.
func (r *EtcdClusterReconciler) resizePod(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed, m *stewardv1.EtcdMember) error {
	p := o.pods[m.Name]
	if p == nil {
		return fmt.Errorf("resizing %s: no Pod", m.Name)
	}
	base := p.DeepCopy()
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == "etcd" {
			p.Spec.Containers[i].Resources = plan.EffectiveResources(ec.Status.Observed.Resources)
		}
	}
	err := r.Client.SubResource("resize").Patch(ctx, p, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
		refused := base.DeepCopy()
		if refused.Annotations == nil {
			refused.Annotations = map[string]string{}
		}
		refused.Annotations[stewardv1.AnnotationResizeRefused] = err.Error()
		return client.IgnoreNotFound(r.Client.Patch(ctx, refused, client.MergeFrom(base)))
	}
	return client.IgnoreNotFound(err)
}

// recordPodTemplate records the observed template on the member and on its Pod once the Pod runs it
// without a rebuild (resized in place, or its container restarted on the new image).
func (r *EtcdClusterReconciler) recordPodTemplate(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed, m *stewardv1.EtcdMember) error {
	t := *ec.Status.Observed.DeepCopy()
	t.PodMetadata = *m.Spec.Template.PodMetadata.DeepCopy() // patched on its own (PatchPodMetadata)
	if p := o.pods[m.Name]; p != nil {
		base := p.DeepCopy()
		resources.SetPodTemplate(p, &t)
		if err := r.Client.Patch(ctx, p, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return r.recordTemplate(ctx, m, t)
}

// RestartContainer implements the disruption effect: the etcd container's image and the Pod's
// template record change together, and the kubelet restarts the container in the running Pod. The
// member's own record follows on the next reconcile (plan.RecordTemplate), after the Pod's.
// The same patch records the container it restarts (AnnotationRestartedFrom), so the restart is
// only done when the kubelet reports another one: its status lags the change for a moment. The
// optimistic lock makes the recorded ID the one of the Pod that was judged.
func (e effects) RestartContainer(ctx context.Context, member string) error {
	p := e.o.pods[member]
	if p == nil || p.DeletionTimestamp != nil {
		return fmt.Errorf("restarting %s in place: no running Pod", member)
	}
	t := e.ec.Status.Observed
	base := p.DeepCopy()
	changed := false
	for i := range p.Spec.Containers {
		if c := &p.Spec.Containers[i]; c.Name == "etcd" {
			image := resources.Image(t, e.r.EtcdImageRepository)
			changed = c.Image != image
			c.Image = image
		}
	}
	resources.SetPodTemplate(p, t)
	// The kubelet restarts the container only when its image changes. A Pod already on the image
	// (its template record behind) gets the record alone: marking the running container as the
	// one restarted would hold the member unready for a restart that never comes (CI: a roll
	// stuck 8 minutes on "web-1 is not ready" with web-1's Pod Ready).
	if changed {
		from := etcdContainerID(p)
		if from == "" {
			from = "none" // no container yet: any the kubelet reports later is the restarted one
		}
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[stewardv1.AnnotationRestartedFrom] = from
	}
	return e.r.Client.Patch(ctx, p, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}
