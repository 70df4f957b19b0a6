package resources

import (
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func objectLabels(cluster string) map[string]string {
	l := SelectorLabels(cluster)
	l[LabelManagedBy] = "steward"
	return l
}

// The Services are written in full, defaults included (a port's protocol): ensureServices compares
// them with what the API server returns, and a field left for the server to default differs on
// every reconcile, which costs a write request the server then drops as a no-op.

// PeerService is the headless Service behind members' DNS names. It publishes addresses of Pods
// that are not ready yet, because a joining member must reach its peers before it can be ready.
func PeerService(ec *stewardv1.EtcdCluster) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: PeerServiceName(ec.Name), Namespace: ec.Namespace, Labels: objectLabels(ec.Name)},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 SelectorLabels(ec.Name),
			Ports: []corev1.ServicePort{
				{Name: "client", Protocol: corev1.ProtocolTCP, Port: ClientPort, TargetPort: intstr.FromInt32(ClientPort)},
				{Name: "peer", Protocol: corev1.ProtocolTCP, Port: PeerPort, TargetPort: intstr.FromInt32(PeerPort)},
			},
		},
	}
}

// ClientService is what applications connect to: ready voters only, so a learner (which refuses
// most requests) or a member still starting never receives client traffic.
func ClientService(ec *stewardv1.EtcdCluster) *corev1.Service {
	sel := SelectorLabels(ec.Name)
	sel[stewardv1.LabelVoter] = "true"
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: ClientServiceName(ec.Name), Namespace: ec.Namespace, Labels: objectLabels(ec.Name)},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: sel,
			Ports:    []corev1.ServicePort{{Name: "client", Protocol: corev1.ProtocolTCP, Port: ClientPort, TargetPort: intstr.FromInt32(ClientPort)}},
		},
	}
}

// PDB is the budget over voter Pods, or nil when the user disabled it. It gates evictions (node
// drains) only: the operator deletes Pods directly, one at a time, through its own chokepoint.
// The default lets one voter go: it keeps available one less than the larger of the intended size
// and the voter Pods there are now (voters). The intended size, so a drain during a scale-out
// takes nobody; the voters now, because the budget counts the Pods it selects, and with one voter
// more than spec.replicas (an add-first surge, a scale-in under way) replicas-1 would let two go at
// once. maxUnavailable would say it directly, but Kubernetes honours it only for Pods of a
// controller with a scale subresource, which EtcdMember is not.
func PDB(ec *stewardv1.EtcdCluster, voters int) *policyv1.PodDisruptionBudget {
	spec := ec.Spec.PodDisruptionBudget
	if spec != nil && spec.Enabled != nil && !*spec.Enabled {
		return nil
	}
	replicas := ptr.Deref(ec.Spec.Replicas, 3)
	minAvailable := max(max(replicas, int32(voters))-1, 0)
	if spec != nil && spec.MinAvailable != nil {
		minAvailable = *spec.MinAvailable
	}
	sel := SelectorLabels(ec.Name)
	sel[stewardv1.LabelVoter] = "true"
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: PDBName(ec.Name), Namespace: ec.Namespace, Labels: objectLabels(ec.Name)},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(minAvailable)),
			Selector:     &metav1.LabelSelector{MatchLabels: sel},
		},
	}
}

// PVC is a PVC-backed member's data claim, or nil for memory storage.
func PVC(ec *stewardv1.EtcdCluster, member string, t *stewardv1.MemberTemplate) *corev1.PersistentVolumeClaim {
	if t.Storage.Medium == stewardv1.StorageMediumMemory {
		return nil
	}
	labels := objectLabels(ec.Name)
	labels[stewardv1.LabelMember] = member
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: PVCName(member), Namespace: ec.Namespace, Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: t.Storage.StorageClassName,
		},
	}
	if t.Storage.Size != nil {
		pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: *t.Storage.Size}
	}
	return pvc
}
