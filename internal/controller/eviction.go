package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/eviction"
)

// PrepareEviction implements the disruption effect of disruption.Evict: the Disrupter drained the
// member from the client Service already; the Pod is marked prepared, and the eviction webhook lets
// the eviction through on kubectl drain's next retry. The optimistic lock makes the mark land on
// the Pod that was judged (a Pod recreated since carries no request).
func (e effects) PrepareEviction(ctx context.Context, member string) error {
	p := e.o.pods[member]
	if p == nil || p.DeletionTimestamp != nil {
		return nil // evicted already (past the bound) or gone: nothing to prepare
	}
	fresh := &corev1.Pod{}
	if err := e.r.reader().Get(ctx, client.ObjectKeyFromObject(p), fresh); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !eviction.Live(eviction.RequestedAt(fresh), e.r.now()) {
		return fmt.Errorf("preparing %s for its eviction: the request is no longer live", member)
	}
	base := fresh.DeepCopy()
	if fresh.Annotations == nil {
		fresh.Annotations = map[string]string{}
	}
	fresh.Annotations[stewardv1.AnnotationEvictionPrepared] = e.r.now().UTC().Format(time.RFC3339Nano)
	return client.IgnoreNotFound(e.r.Client.Patch(ctx, fresh, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})))
}

// evictionHeld: the Pod is prepared for a live eviction request, so it stays out of the client
// Service until Kubernetes evicts it (or the request expires).
func evictionHeld(p *corev1.Pod, now time.Time) bool {
	return eviction.Prepared(p, now)
}

// clearExpiredEviction removes the eviction annotations of a request that expired (the drain was
// stopped, or the eviction went to the PodDisruptionBudget and was refused for good): the member
// serves clients again (syncVoterLabels restores its label), and a new request starts a new bound.
func (r *EtcdClusterReconciler) clearExpiredEviction(ctx context.Context, p *corev1.Pod) error {
	_, requested := p.Annotations[stewardv1.AnnotationEvictionRequested]
	_, prepared := p.Annotations[stewardv1.AnnotationEvictionPrepared]
	if (!requested && !prepared) || p.DeletionTimestamp != nil || eviction.Live(eviction.RequestedAt(p), r.now()) {
		return nil
	}
	base := p.DeepCopy()
	delete(p.Annotations, stewardv1.AnnotationEvictionRequested)
	delete(p.Annotations, stewardv1.AnnotationEvictionPrepared)
	return client.IgnoreNotFound(r.Client.Patch(ctx, p, client.MergeFrom(base)))
}
