package controller

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-steward/steward/internal/plan"
)

// TaintOutOfService is the taint an administrator puts on a node that is shut down for good, so
// its Pods' volumes may be detached (non-graceful node shutdown).
const TaintOutOfService = "node.kubernetes.io/out-of-service"

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// nodeFacts reads, live, the Node of each member's Pod: whether it is Ready (so its kubelet's
// report on the etcd container is current), and whether it is gone or out of service. Only a
// quorum in doubt needs it, so there is no Node informer (and no cluster-wide Node cache). A Node
// that cannot be read proves nothing: its facts stay false.
func (r *EtcdClusterReconciler) nodeFacts(ctx context.Context, members []plan.Member, pods map[string]*corev1.Pod) {
	nodes := map[string]*corev1.Node{}
	gone := map[string]bool{}
	for i := range members {
		p := pods[members[i].Name]
		if p == nil || p.Spec.NodeName == "" {
			continue
		}
		name := p.Spec.NodeName
		if _, seen := nodes[name]; !seen && !gone[name] {
			var n corev1.Node
			err := r.reader().Get(ctx, types.NamespacedName{Name: name}, &n)
			switch {
			case apierrors.IsNotFound(err):
				gone[name] = true
			case err == nil:
				nodes[name] = &n
			default:
				nodes[name] = nil // unknown: no evidence either way
			}
		}
		pod := &members[i].Pod
		pod.NodeGone = gone[name] || outOfService(nodes[name])
		pod.NodeReady = nodeReady(nodes[name])
	}
}

// zoneReadTimeout bounds the wait for the Node metadata cache: status is worth no stalled reconcile.
const zoneReadTimeout = 5 * time.Second

// nodeZones fills in each scheduled member's zone, the topology.kubernetes.io/zone label of its
// Node, for status and PlacementAtRisk. Every reconcile needs it, so it is read from the manager's
// cache of Node metadata (one watch of labels, no spec or status, started on first use; hence list
// and watch on nodes) rather than by a GET per member per reconcile. A Node that cannot be read
// leaves the zone unknown ("").
func (r *EtcdClusterReconciler) nodeZones(ctx context.Context, members []plan.Member) {
	ctx, cancel := context.WithTimeout(ctx, zoneReadTimeout)
	defer cancel()
	zones := map[string]string{}
	for i := range members {
		pod := &members[i].Pod
		if pod.Node == "" {
			continue
		}
		zone, seen := zones[pod.Node]
		if !seen && ctx.Err() == nil {
			n := &metav1.PartialObjectMetadata{}
			n.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
			if err := r.Client.Get(ctx, types.NamespacedName{Name: pod.Node}, n); err == nil {
				zone = n.Labels[corev1.LabelTopologyZone]
			}
			zones[pod.Node] = zone
		}
		pod.Zone = zone
	}
}

func nodeReady(n *corev1.Node) bool {
	if n == nil {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func outOfService(n *corev1.Node) bool {
	if n == nil {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == TaintOutOfService {
			return true
		}
	}
	return false
}

// observer names this operator process: the host (the Pod's name) and when it started, so a
// restarted or newly elected operator is another observer and starts the quorum-loss clock anew.
func (r *EtcdClusterReconciler) observer() string {
	r.observerOnce.Do(func() {
		host, _ := os.Hostname()
		r.observerID = fmt.Sprintf("%s/%d", host, time.Now().UnixNano())
	})
	return r.observerID
}
