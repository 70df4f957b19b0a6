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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-steward/steward/internal/evidence"
	"github.com/etcd-steward/steward/internal/plan"
	"github.com/etcd-steward/steward/internal/resources"
)

// TaintOutOfService is the taint an administrator puts on a node that is shut down for good, so
// its Pods' volumes may be detached (non-graceful node shutdown). Steward reads it as the
// administrator's word that the node is gone: its member is replaced as soon as etcd's leader
// shows it lost (docs/operations.md, "Node loss").
const TaintOutOfService = "node.kubernetes.io/out-of-service"

// labelHostname is the node label a node-local PersistentVolume's affinity names.
const labelHostname = "kubernetes.io/hostname"

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get

// nodeFacts reads, live, the Node of each member's Pod (Ready and since when, deleted, cordoned, out
// of service) and, for a member whose Pod does not run, the one node its PersistentVolume is pinned
// to (node-local storage). There is no Node informer (no cluster-wide Node cache): a few Gets per
// reconcile, each Node once. A Node or PV that cannot be read proves nothing: its facts stay
// unknown.
func (r *EtcdClusterReconciler) nodeFacts(ctx context.Context, kube client.Reader, members []plan.Member,
	pods map[string]*corev1.Pod, pvcs map[string]*corev1.PersistentVolumeClaim) {
	nodes := map[string]evidence.Node{}
	node := func(name string) evidence.Node {
		if n, seen := nodes[name]; seen {
			return n
		}
		var obj corev1.Node
		err := kube.Get(ctx, types.NamespacedName{Name: name}, &obj)
		n := evidence.Node{Name: name}
		switch {
		case apierrors.IsNotFound(err):
			n.Known, n.Deleted = true, true
		case err == nil:
			n = nodeEvidence(&obj)
		}
		nodes[name] = n
		return n
	}
	for i := range members {
		m := &members[i]
		p := pods[m.Name]
		if p != nil && p.Spec.NodeName != "" {
			n := node(p.Spec.NodeName)
			m.Nodes.Pod = n
			m.Pod.NodeGone = n.Deleted || n.OutOfService
			m.Pod.NodeReady = n.Known && n.Ready
		}
		if p != nil && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			continue // a running Pod: where its volume lives does not matter now
		}
		if pvc := pvcs[resources.PVCName(m.Name)]; pvc != nil && pvc.Spec.VolumeName != "" {
			if name := r.pinnedNode(ctx, kube, pvc.Spec.VolumeName); name != "" {
				n := node(name)
				m.Nodes.Volume = &n
			}
		}
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

// nodeEvidence is what a Node says: its Ready condition (and since when it is not), its cordon
// and the out-of-service taint.
func nodeEvidence(n *corev1.Node) evidence.Node {
	out := evidence.Node{Name: n.Name, Known: true, Cordoned: n.Spec.Unschedulable}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Ready = c.Status == corev1.ConditionTrue
			if !out.Ready {
				out.NotReadySince = c.LastTransitionTime.Time
			}
		}
	}
	for _, t := range n.Spec.Taints {
		if t.Key == TaintOutOfService {
			out.OutOfService = true
		}
	}
	return out
}

// pinnedNode is the one node a PersistentVolume's required node affinity allows (a local volume,
// or a provisioner's node-local disk), "" when it may attach elsewhere (network storage), names
// several nodes, or cannot be read.
func (r *EtcdClusterReconciler) pinnedNode(ctx context.Context, kube client.Reader, volume string) string {
	var pv corev1.PersistentVolume
	if err := kube.Get(ctx, types.NamespacedName{Name: volume}, &pv); err != nil {
		return ""
	}
	return PinnedNode(&pv)
}

// PinnedNode is the single hostname a PV's required node affinity names, "" otherwise. Every term
// must name the same one node (terms are ORed: any other term would let the volume elsewhere).
func PinnedNode(pv *corev1.PersistentVolume) string {
	na := pv.Spec.NodeAffinity
	if na == nil || na.Required == nil || len(na.Required.NodeSelectorTerms) == 0 {
		return ""
	}
	node := ""
	for _, term := range na.Required.NodeSelectorTerms {
		found := ""
		for _, e := range term.MatchExpressions {
			if e.Key == labelHostname && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 {
				found = e.Values[0]
			}
		}
		if found == "" || (node != "" && found != node) {
			return ""
		}
		node = found
	}
	return node
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
