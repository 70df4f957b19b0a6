package resources

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// NonRootID is the user and group every Steward-built container runs as: distroless images' nonroot
// (etcd's official images are distroless), so Pods pass Pod Security "restricted".
const NonRootID int64 = 65532

// PodRevision numbers how this Steward renders member Pods. Raise it with any change to what a member
// Pod holds beyond its template (security context, probes, flags, the wrapper): members whose Pods
// carry a lower one are rolled onto the new Pod, one at a time (plan.Facts.PodRevision), instead of
// being left on the old one or all changing at once. TestPodRevisionGuardsRendering fails when the
// rendering changes and this does not. Revision 1 is every Pod built before it was recorded.
const PodRevision = 3

// RestrictedPod is the Pod-level security context of member Pods and Steward's Jobs: non-root, the
// runtime's default seccomp profile, and volumes group-owned by NonRootID. OnRootMismatch makes the
// kubelet hand a volume written by an older, root-running etcd to the new user once (where the
// volume type supports ownership management: block-backed CSI, local, emptyDir), then skip the walk.
func RestrictedPod() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:        ptr.To(true),
		RunAsUser:           ptr.To(NonRootID),
		RunAsGroup:          ptr.To(NonRootID),
		FSGroup:             ptr.To(NonRootID),
		FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// RestrictedContainer is every container's security context: no privilege escalation, no
// capabilities, a read-only root filesystem (etcd writes only to its data volume).
func RestrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// PodRevisionOf reads the revision a Pod was built with; 1 when it does not say (built before
// revisions were recorded).
func PodRevisionOf(p *corev1.Pod) int {
	n := 0
	for _, c := range p.Annotations[stewardv1.AnnotationPodRevision] {
		if c < '0' || c > '9' || n > 1<<20 {
			return 1
		}
		n = n*10 + int(c-'0')
	}
	if n == 0 {
		return 1
	}
	return n
}
