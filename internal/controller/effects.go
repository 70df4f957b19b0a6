package controller

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/failpoint"
	"github.com/etcd-steward/steward/internal/resources"
)

// effects implements disruption.Effects: the raw side effects. Only a disruption.Disrupter calls
// them, after its check passed on this reconcile's facts; nothing else in Steward deletes a
// member's Pod or PVC or removes a member from etcd.
type effects struct {
	r  *EtcdClusterReconciler
	o  *observed
	ec *stewardv1.EtcdCluster
}

// Refresh reads everything again, past the cache: members, Pods and PVCs from the API server, and
// etcd's member list, statuses and reads, for the Disrupter's second check right before it acts.
func (e effects) Refresh(ctx context.Context) (disruption.Cluster, error) {
	o, err := e.r.gatherFrom(ctx, e.r.reader(), e.ec)
	if err != nil {
		return disruption.Cluster{}, err
	}
	// An unreadable member list is a fact too: Check refuses what it cannot prove without one.
	return o.facts.DisruptionView(), nil
}

func (e effects) DeletePod(ctx context.Context, member string) error {
	p := e.o.pods[member]
	if p == nil {
		return nil
	}
	failpoint.Hit(ctx, failpoint.BeforePodDelete)
	// Preconditioned on the UID we judged, so a Pod recreated in between is never the one deleted.
	if err := e.r.Client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); client.IgnoreNotFound(err) != nil {
		return err
	}
	failpoint.Hit(ctx, failpoint.AfterPodDelete)
	return nil
}

func (e effects) RemoveMember(ctx context.Context, member string, id uint64) error {
	if e.o.client == nil {
		return fmt.Errorf("no etcd client to remove %s", member)
	}
	return e.o.client.Remove(ctx, id)
}

func (e effects) DeletePVC(ctx context.Context, member string) error {
	p := e.o.pvcs[resources.PVCName(member)]
	if p == nil {
		return nil
	}
	return client.IgnoreNotFound(e.r.Client.Delete(ctx, p, client.Preconditions{UID: &p.UID},
		client.PropagationPolicy(metav1.DeletePropagationBackground)))
}

func (e effects) Defragment(ctx context.Context, member string) error {
	ep, ok := e.o.endpoints[member]
	if !ok || e.o.client == nil {
		return fmt.Errorf("no etcd endpoint to defragment %s", member)
	}
	return e.o.client.Defragment(ctx, ep)
}
