package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// MemberTemplate is everything a single member is built from. EtcdCluster.spec carries it inline as
// the user's intent, EtcdCluster.status.observed holds the copy the operator is rolling towards, and
// EtcdMember.spec.template records what each member actually runs. A member is outdated when its
// template differs structurally from the observed one, so every field here reaches running members.
type MemberTemplate struct {
	// version is the etcd version to run, as X.Y.Z (for example 3.6.5). With no image override the
	// image is <operator's etcd image repository>:v<version>.
	// +required
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]+\\\\.[0-9]+\\\\.[0-9]+$')",message="spec.version must be X.Y.Z, for example 3.6.5"
	Version string `json:"version"`

	// image overrides the etcd container image. It must still run etcd at spec.version; the tag is
	// not parsed for the version.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// imagePullSecrets are passed to every member Pod.
	// +optional
	// +listType=atomic
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// storage is where each member keeps its data directory.
	// +optional
	// +kubebuilder:default={}
	Storage StorageSpec `json:"storage"`

	// resources of the etcd container in every member Pod.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// affinity of member Pods, as given (Steward adds none).
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// topologySpreadConstraints of member Pods. When empty, Steward spreads members of one cluster
	// over nodes (kubernetes.io/hostname, maxSkew 1, DoNotSchedule) and, preferably, over zones
	// (topology.kubernetes.io/zone, ScheduleAnyway), counting only nodes the Pods may use
	// (nodeAffinityPolicy and nodeTaintsPolicy Honor). Constraints given here replace both.
	// +optional
	// +listType=atomic
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// nodeSelector of member Pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations of member Pods.
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// priorityClassName of member Pods.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// podMetadata adds labels and annotations to member Pods. Changing it patches running Pods in
	// place, without a restart. Labels Steward sets itself cannot be overridden.
	// +optional
	PodMetadata PodMetadata `json:"podMetadata,omitempty"`

	// options are etcd settings. Each change is rolled onto every member, one member at a time.
	// +optional
	Options EtcdOptions `json:"options,omitempty"`
}

// StorageMedium says what backs a member's data directory.
// +kubebuilder:validation:Enum="";Memory
type StorageMedium string

const (
	// StorageMediumDefault keeps each member's data on its own PersistentVolumeClaim.
	StorageMediumDefault StorageMedium = ""
	// StorageMediumMemory keeps data on a tmpfs emptyDir: fast, but a member whose Pod goes loses its
	// data and is replaced by a new member, so such a cluster cannot be scaled to zero.
	StorageMediumMemory StorageMedium = "Memory"
)

// RetentionPolicy says what happens to members' PVCs when the cluster is deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type RetentionPolicy string

const (
	// RetentionRetain keeps PVCs after the cluster is deleted, so a mistaken delete loses no data.
	RetentionRetain RetentionPolicy = "Retain"
	// RetentionDelete deletes PVCs with the cluster.
	RetentionDelete RetentionPolicy = "Delete"
)

// StorageSpec is where members keep their data.
// +kubebuilder:validation:XValidation:rule="(has(self.medium) && self.medium == 'Memory') == (has(oldSelf.medium) && oldSelf.medium == 'Memory')",message="spec.storage.medium is locked: moving data between a PVC and memory would need a new cluster; create one and migrate"
// +kubebuilder:validation:XValidation:rule="has(self.storageClassName) == has(oldSelf.storageClassName) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",message="spec.storage.storageClassName is locked: existing PVCs cannot change class; create a new cluster to move"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.size) || (has(self.size) && quantity(string(self.size)).compareTo(quantity(string(oldSelf.size))) >= 0)",message="spec.storage.size may only grow: PVCs cannot shrink"
// +kubebuilder:validation:XValidation:rule="!has(self.medium) || self.medium != 'Memory' || !has(self.storageClassName)",message="spec.storage.storageClassName applies to PVC storage only; remove it or the Memory medium"
type StorageSpec struct {
	// medium is "" (the default) for a PersistentVolumeClaim per member, or Memory for a tmpfs.
	// Locked after creation.
	// +optional
	Medium StorageMedium `json:"medium,omitempty"`

	// size of each member's volume (the PVC request, or the tmpfs size limit). It may only grow;
	// PVCs are expanded in place when their StorageClass allows it.
	// +optional
	// +kubebuilder:default="4Gi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="spec.storage.size must be a positive quantity such as 8Gi"
	Size *resource.Quantity `json:"size,omitempty"`

	// storageClassName of the members' PVCs; empty uses the cluster's default class. Locked after
	// creation.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	StorageClassName *string `json:"storageClassName,omitempty"`

	// retentionPolicy says whether PVCs are deleted with the cluster (Delete) or kept (Retain; empty
	// means Retain, so a mistaken delete never loses data). It touches no running member, so it is not
	// part of the template members are compared against.
	// +optional
	RetentionPolicy RetentionPolicy `json:"retentionPolicy,omitempty"`
}

// PodMetadata is extra metadata for member Pods.
type PodMetadata struct {
	// labels added to member Pods.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// annotations added to member Pods.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}
