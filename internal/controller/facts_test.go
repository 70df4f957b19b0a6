package controller

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/health"
	"github.com/etcd-steward/steward/internal/plan"
	"github.com/etcd-steward/steward/internal/resources"
)

// pvcFacts is the plan's view of a member's PVC: what it holds, whether it may grow, and whether
// it is this cluster's at all (a foreign PVC is never mounted, deleted or adopted).
func TestPVCFacts(t *testing.T) {
	at := metav1.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	ec := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", UID: "uid-2"}}
	pvc := func(edit func(p *corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
		p := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data-c-0", Annotations: map[string]string{stewardv1.AnnotationClusterUID: "uid-2"}},
			Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}}},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound,
				Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}
		if edit != nil {
			edit(p)
		}
		return p
	}
	tests := []struct {
		name      string
		pvc       *corev1.PersistentVolumeClaim
		resizable bool
		check     func(f plan.PVC) bool
	}{
		{"no PVC", nil, true, func(f plan.PVC) bool { return f == (plan.PVC{}) }},
		{"this cluster's, bound", pvc(nil), false, func(f plan.PVC) bool {
			return f.Exists && !f.Deleting && !f.Foreign && !f.Resizable && !f.FileSystemResizePending &&
				f.Requested.Cmp(resource.MustParse("2Gi")) == 0 && f.Capacity.Cmp(resource.MustParse("1Gi")) == 0
		}},
		{"the class allows expansion", pvc(nil), true, func(f plan.PVC) bool { return f.Resizable }},
		{"of a predecessor of the same name", pvc(func(p *corev1.PersistentVolumeClaim) {
			p.Annotations[stewardv1.AnnotationClusterUID] = "uid-1"
		}), false, func(f plan.PVC) bool { return f.Exists && f.Foreign }},
		{"no owner recorded is foreign", pvc(func(p *corev1.PersistentVolumeClaim) { p.Annotations = nil }), false,
			func(f plan.PVC) bool { return f.Foreign }},
		{"deleting", pvc(func(p *corev1.PersistentVolumeClaim) { p.DeletionTimestamp = &at }), false,
			func(f plan.PVC) bool { return f.Exists && f.Deleting }},
		{"unbound: no capacity yet", pvc(func(p *corev1.PersistentVolumeClaim) {
			p.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
		}), false, func(f plan.PVC) bool { return f.Exists && f.Capacity.IsZero() && !f.Requested.IsZero() }},
		{"the filesystem waits for a restart", pvc(func(p *corev1.PersistentVolumeClaim) {
			p.Status.Conditions = []corev1.PersistentVolumeClaimCondition{
				{Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionFalse},
				{Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionTrue}}
		}), true, func(f plan.PVC) bool { return f.FileSystemResizePending }},
		{"a resize pending condition that is False", pvc(func(p *corev1.PersistentVolumeClaim) {
			p.Status.Conditions = []corev1.PersistentVolumeClaimCondition{
				{Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionFalse}}
		}), true, func(f plan.PVC) bool { return !f.FileSystemResizePending }},
		{"the controller resizing the volume is not the filesystem's wait", pvc(func(p *corev1.PersistentVolumeClaim) {
			p.Status.Conditions = []corev1.PersistentVolumeClaimCondition{
				{Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue}}
		}), true, func(f plan.PVC) bool { return !f.FileSystemResizePending }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if f := pvcFacts(tt.pvc, ec, tt.resizable); !tt.check(f) {
				t.Errorf("facts %+v", f)
			}
		})
	}
}

// resizeFacts says whether an in-place resize is done: the kubelet saw the latest spec, runs the
// container with exactly its resources, and reports no resize pending or in progress.
func TestResizeFacts(t *testing.T) {
	at := metav1.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	want := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
	pod := func(edit func(p *corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c-0", Generation: 3},
			Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "etcd", Resources: *want.DeepCopy()},
				{Name: "sidecar", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("9")}}}}},
			Status: corev1.PodStatus{ObservedGeneration: 3, ContainerStatuses: []corev1.ContainerStatus{
				{Name: "sidecar"},
				{Name: "etcd", Resources: want.DeepCopy()}}}}
		if edit != nil {
			edit(p)
		}
		return p
	}
	etcd := func(p *corev1.Pod) *corev1.ContainerStatus { return &p.Status.ContainerStatuses[1] }
	tests := []struct {
		name  string
		pod   *corev1.Pod
		check func(f plan.Resize) bool
	}{
		{"applied", pod(nil), func(f plan.Resize) bool {
			return f.Applied && f.Pending == "" && f.Refused == "" && f.Spec.Requests.Cpu().Cmp(resource.MustParse("500m")) == 0
		}},
		{"quantities compare by value", pod(func(p *corev1.Pod) {
			etcd(p).Resources.Requests[corev1.ResourceCPU] = resource.MustParse("0.5")
			etcd(p).Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1024Mi")
		}), func(f plan.Resize) bool { return f.Applied }},
		{"the spec is read from the etcd container only", pod(nil), func(f plan.Resize) bool {
			_, cpuLimit := f.Spec.Limits[corev1.ResourceCPU]
			return f.Spec.Requests.Cpu().Cmp(resource.MustParse("9")) != 0 && !cpuLimit
		}},
		{"the kubelet has not seen the resize yet", pod(func(p *corev1.Pod) { p.Generation = 4 }),
			func(f plan.Resize) bool { return !f.Applied }},
		{"the kubelet has seen a newer generation", pod(func(p *corev1.Pod) { p.Status.ObservedGeneration = 5 }),
			func(f plan.Resize) bool { return f.Applied }},
		{"running with other requests", pod(func(p *corev1.Pod) {
			etcd(p).Resources.Requests[corev1.ResourceCPU] = resource.MustParse("250m")
		}), func(f plan.Resize) bool { return !f.Applied }},
		{"running with other limits", pod(func(p *corev1.Pod) {
			etcd(p).Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}
		}), func(f plan.Resize) bool { return !f.Applied }},
		{"no resources reported", pod(func(p *corev1.Pod) { etcd(p).Resources = nil }),
			func(f plan.Resize) bool { return !f.Applied }},
		{"a sidecar's resources do not count", pod(func(p *corev1.Pod) {
			p.Status.ContainerStatuses = p.Status.ContainerStatuses[:1]
			p.Status.ContainerStatuses[0].Resources = want.DeepCopy()
		}), func(f plan.Resize) bool { return !f.Applied }},
		{"infeasible", pod(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue,
				Reason: corev1.PodReasonInfeasible, LastTransitionTime: at}}
		}), func(f plan.Resize) bool {
			return !f.Applied && f.Pending == corev1.PodReasonInfeasible && f.PendingSince.Equal(at.Time)
		}},
		{"deferred", pod(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue,
				Reason: corev1.PodReasonDeferred, LastTransitionTime: at}}
		}), func(f plan.Resize) bool { return !f.Applied && f.Pending == corev1.PodReasonDeferred }},
		{"a pending condition that is False is no wait", pod(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionFalse,
				Reason: corev1.PodReasonDeferred, LastTransitionTime: at}}
		}), func(f plan.Resize) bool { return f.Applied && f.Pending == "" && f.PendingSince.IsZero() }},
		{"in progress", pod(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue}}
		}), func(f plan.Resize) bool { return !f.Applied && f.Pending == "" }},
		{"in progress no more", pod(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizeInProgress, Status: corev1.ConditionFalse},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}), func(f plan.Resize) bool { return f.Applied }},
		{"refused by the API server", pod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{stewardv1.AnnotationResizeRefused: "Pod QOS Class may not change"}
		}), func(f plan.Resize) bool { return f.Refused == "Pod QOS Class may not change" && f.Applied }},
		{"no etcd container", &corev1.Pod{}, func(f plan.Resize) bool {
			return !f.Applied && f.Spec.Requests == nil && f.Spec.Limits == nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if f := resizeFacts(tt.pod); !tt.check(f) {
				t.Errorf("facts %+v", f)
			}
		})
	}
	// The facts' spec is a copy: the plan may not change the cached Pod through it.
	p := pod(nil)
	f := resizeFacts(p)
	f.Spec.Requests[corev1.ResourceCPU] = resource.MustParse("7")
	if c := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; c.Cmp(resource.MustParse("500m")) != 0 {
		t.Errorf("the Pod's request changed through its facts: %s", c.String())
	}
}

// The method adds ImageOnly for a Pod that needs a roll to reach the observed template, judged
// from the template the Pod was built from.
func TestReconcilerPodFactsImageOnly(t *testing.T) {
	r := &EtcdClusterReconciler{EtcdImageRepository: "repo/etcd"}
	cluster := func(observed *stewardv1.MemberTemplate) *stewardv1.EtcdCluster {
		return &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u"},
			Status: stewardv1.EtcdClusterStatus{Observed: observed}}
	}
	built := func(t *stewardv1.MemberTemplate) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c-0"}}
		if t != nil {
			resources.SetPodTemplate(p, t)
		}
		return p
	}
	m := &stewardv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "c-0"}}
	v := func(version string) *stewardv1.MemberTemplate { return &stewardv1.MemberTemplate{Version: version} }
	tests := []struct {
		name      string
		pod       *corev1.Pod
		observed  *stewardv1.MemberTemplate
		imageOnly bool
	}{
		{"a patch release", built(v("3.6.15")), v("3.6.16"), true},
		{"a registry move", built(v("3.6.16")), &stewardv1.MemberTemplate{Version: "3.6.16", Image: "mirror.local/etcd:v3.6.16"}, true},
		{"a minor version step changes flags", built(v("3.5.21")), v("3.6.16"), false},
		{"a Pod spec change is no image change", built(v("3.6.16")), &stewardv1.MemberTemplate{Version: "3.6.16", PriorityClassName: "etcd-critical"}, false},
		{"nothing to change", built(v("3.6.16")), v("3.6.16"), false},
		{"a resize is no roll", built(&stewardv1.MemberTemplate{Version: "3.6.15"}),
			&stewardv1.MemberTemplate{Version: "3.6.15", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}, false},
		{"a Pod that does not say what it was built from", built(nil), v("3.6.16"), false},
		{"no observed template yet", built(v("3.6.15")), nil, false},
		{"no Pod", nil, v("3.6.16"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := r.podFacts(cluster(tt.observed), m, tt.pod)
			if f.ImageOnly != tt.imageOnly {
				t.Errorf("ImageOnly = %v, want %v", f.ImageOnly, tt.imageOnly)
			}
			if tt.pod != nil && !f.Exists {
				t.Error("the method lost the plain facts")
			}
		})
	}
}

// resizable: a StorageClass that allows expansion, by name or as the default; anything unknown is
// no, so Steward never asks for an expansion the class would refuse.
func TestResizable(t *testing.T) {
	class := func(name string, isDefault bool, expand *bool) *storagev1.StorageClass {
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "x", AllowVolumeExpansion: expand}
		if isDefault {
			sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
		}
		return sc
	}
	tests := []struct {
		name    string
		class   *string
		classes []client.Object
		want    bool
	}{
		{"named, expandable", ptr.To("fast"), []client.Object{class("fast", false, ptr.To(true)), class("std", true, ptr.To(false))}, true},
		{"named, not expandable", ptr.To("fast"), []client.Object{class("fast", false, ptr.To(false)), class("std", true, ptr.To(true))}, false},
		{"named, expansion unset", ptr.To("fast"), []client.Object{class("fast", false, nil)}, false},
		{"named but missing", ptr.To("gone"), []client.Object{class("std", true, ptr.To(true))}, false},
		{"the default class", nil, []client.Object{class("fast", false, ptr.To(false)), class("std", true, ptr.To(true))}, true},
		{"the default class, not expandable", nil, []client.Object{class("fast", false, ptr.To(true)), class("std", true, ptr.To(false))}, false},
		{"no default class", nil, []client.Object{class("fast", false, ptr.To(true))}, false},
		{"no classes", nil, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kube := fake.NewClientBuilder().WithObjects(tt.classes...).Build()
			ec := &stewardv1.EtcdCluster{Spec: stewardv1.EtcdClusterSpec{MemberTemplate: stewardv1.MemberTemplate{
				Storage: stewardv1.StorageSpec{StorageClassName: tt.class}}}}
			if got := (&EtcdClusterReconciler{}).resizable(context.Background(), kube, ec); got != tt.want {
				t.Errorf("resizable = %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("classes cannot be listed", func(t *testing.T) {
		kube := fake.NewClientBuilder().WithScheme(runtime.NewScheme()).Build()
		if (&EtcdClusterReconciler{}).resizable(context.Background(), kube, &stewardv1.EtcdCluster{}) {
			t.Error("resizable when the classes are unknown")
		}
	})
}

// initialCluster is --initial-cluster for a joiner, from etcd's live member list: the started
// members by their names, the joiner (a learner with no name yet) by its own.
func TestInitialCluster(t *testing.T) {
	ec := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	url := func(name string) string { return resources.PeerURL(ec, name) }
	joiner := &stewardv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "c-3"}}
	tests := []struct {
		name    string
		members []health.Member
		want    string
	}{
		{"no member list", nil, ""},
		{"started members and the unstarted joiner", []health.Member{
			{ID: 1, Name: "c-0", PeerURLs: []string{url("c-0")}},
			{ID: 2, Name: "c-1", PeerURLs: []string{url("c-1")}},
			{ID: 4, PeerURLs: []string{url("c-3")}, IsLearner: true},
		}, "c-0=" + url("c-0") + ",c-1=" + url("c-1") + ",c-3=" + url("c-3")},
		{"the joiner is named by its peer URL, whatever etcd calls it", []health.Member{
			{ID: 1, Name: "c-0", PeerURLs: []string{url("c-0")}},
			{ID: 4, Name: "old-name", PeerURLs: []string{url("c-3")}},
		}, "c-0=" + url("c-0") + ",c-3=" + url("c-3")},
		{"another unstarted member is left out", []health.Member{
			{ID: 1, Name: "c-0", PeerURLs: []string{url("c-0")}},
			{ID: 5, PeerURLs: []string{url("c-4")}, IsLearner: true},
		}, "c-0=" + url("c-0")},
		{"a member with no peer URL is left out", []health.Member{
			{ID: 1, Name: "c-0", PeerURLs: []string{url("c-0")}},
			{ID: 6, Name: "c-5"},
		}, "c-0=" + url("c-0")},
		{"the first peer URL is the one", []health.Member{
			{ID: 1, Name: "c-0", PeerURLs: []string{"https://10.0.0.1:2380", url("c-0")}},
		}, "c-0=https://10.0.0.1:2380"},
		{"the joiner matched on a later peer URL", []health.Member{
			{ID: 4, PeerURLs: []string{"https://10.0.0.4:2380", url("c-3")}},
		}, "c-3=https://10.0.0.4:2380"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &observed{facts: plan.Facts{Etcd: health.Facts{Members: tt.members}}}
			if got := initialCluster(ec, o, joiner); got != tt.want {
				t.Errorf("initialCluster =\n %s\nwant\n %s", got, tt.want)
			}
		})
	}
}
