package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
)

// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch

// drainHold bounds how long a drained Pod stays out of the client Service without being restarted
// (a disruption that failed): then it serves clients again. A defragmentation undrains at once.
const drainHold = 5 * time.Second

// stillDraining: the Pod was drained moments ago and its etcd container has not started again since.
// A container restarted in place on a new image keeps its Pod: without this the next reconcile would
// put the old container back in the Service in the instant before the kubelet stops it.
func stillDraining(p *corev1.Pod, now time.Time) bool {
	if p.Labels[stewardv1.LabelVoter] != resources.VoterDraining {
		return false
	}
	since, err := time.Parse(time.RFC3339Nano, p.Annotations[stewardv1.AnnotationDrainingSince])
	if err != nil || now.Sub(since) >= drainHold {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "etcd" && cs.State.Running != nil && !cs.State.Running.StartedAt.Before(&metav1.Time{Time: since.Truncate(time.Second)}) {
			return false // a new container: readiness decides from here
		}
	}
	return true
}

// How long a drain waits for the client Service's endpoints to drop the Pod, and then for the
// nodes' proxies to follow: kube-proxy applies an EndpointSlice change within its minimum sync
// period (1 s by default in iptables mode). A drain that does not see the endpoints change in time
// goes on: it makes a disruption gentler, and is no condition for it.
var (
	drainTimeout = 5 * time.Second
	drainGrace   = time.Second
)

// Drain implements disruption.Drainer: the member's Pod leaves the client Service (its voter label
// becomes "draining"), and the step waits until the Service's endpoints no longer list the Pod and
// the proxies had time to follow. Clients then open new connections to the other members, and the
// ones already open to this member end cleanly when its etcd stops gracefully. syncVoterLabels puts
// the label back on the next reconcile if the Pod is still there.
func (e effects) Drain(ctx context.Context, member string) error {
	p := e.o.pods[member]
	if p == nil || p.DeletionTimestamp != nil {
		return nil
	}
	ip := p.Status.PodIP
	if p.Labels[stewardv1.LabelVoter] != resources.VoterDraining {
		base := p.DeepCopy()
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[stewardv1.LabelVoter] = resources.VoterDraining
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[stewardv1.AnnotationDrainingSince] = e.r.now().UTC().Format(time.RFC3339Nano)
		if err := e.r.Client.Patch(ctx, p, client.MergeFrom(base)); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	if ip == "" {
		return nil
	}
	start := time.Now()
	listed := true
	for time.Since(start) < drainTimeout {
		var err error
		if listed, err = e.endpointListed(ctx, ip); err != nil || !listed {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	log.FromContext(ctx).V(1).Info("drained from the client Service", "member", member,
		"endpointsUpdated", !listed, "after", time.Since(start))
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(drainGrace):
	}
	return nil
}

// endpointListed says whether the client Service's EndpointSlices still route to ip.
func (e effects) endpointListed(ctx context.Context, ip string) (bool, error) {
	var slices discoveryv1.EndpointSliceList
	if err := e.r.reader().List(ctx, &slices, client.InNamespace(e.ec.Namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: resources.ClientServiceName(e.ec.Name)}); err != nil {
		return false, err
	}
	for _, s := range slices.Items {
		for _, ep := range s.Endpoints {
			for _, a := range ep.Addresses {
				if a == ip && (ep.Conditions.Ready == nil || *ep.Conditions.Ready) {
					return true, nil
				}
			}
		}
	}
	return false, nil
}

// undrain puts a drained voter back into the client Service (its disruption kept it running).
func (r *EtcdClusterReconciler) undrain(ctx context.Context, p *corev1.Pod) error {
	if p == nil || p.Labels[stewardv1.LabelVoter] != resources.VoterDraining {
		return nil
	}
	base := p.DeepCopy()
	p.Labels[stewardv1.LabelVoter] = "true"
	delete(p.Annotations, stewardv1.AnnotationDrainingSince)
	return client.IgnoreNotFound(r.Client.Patch(ctx, p, client.MergeFrom(base)))
}
