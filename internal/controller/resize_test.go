package controller

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/plan"
	"github.com/etcd-steward/steward/internal/resources"
)

func fakeScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := stewardv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func memberPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c-0", Namespace: "ns"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "etcd", Image: "repo/etcd:v3.6.15", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}},
			{Name: "sidecar", Image: "sidecar:1", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}}}}}
}

// resizePod sends the observed resources (limits imply requests) through the Pod's resize
// subresource; a resize the API server refuses is recorded on the Pod, so the plan rolls instead.
func TestResizePod(t *testing.T) {
	ctx := context.Background()
	target := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
	}
	ec := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
		Status: stewardv1.EtcdClusterStatus{Observed: &stewardv1.MemberTemplate{Version: "3.6.15", Resources: target}}}
	m := &stewardv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "c-0", Namespace: "ns"}}
	gr := schema.GroupResource{Resource: "pods"}
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "c-0",
		field.ErrorList{field.Invalid(field.NewPath("spec"), "", "Pod QOS Class may not change as a result of resizing")})
	tests := []struct {
		name string
		// resizeErr is what the API server answers the resize with; nil lets it through.
		resizeErr error
		// gone: the Pod was deleted after the reconcile read it.
		gone    bool
		wantErr bool
		resized bool
		refused string
	}{
		{name: "resized", resized: true},
		{name: "refused as invalid", resizeErr: invalid, refused: "Pod QOS Class may not change"},
		{name: "forbidden", resizeErr: apierrors.NewForbidden(gr, "c-0", errors.New("resize is off")), refused: "resize is off"},
		{name: "the Pod went away", resizeErr: apierrors.NewNotFound(gr, "c-0")},
		{name: "refused, and the Pod went away before the record", resizeErr: invalid, gone: true},
		{name: "a conflict is retried, not recorded", resizeErr: apierrors.NewConflict(gr, "c-0", errors.New("modified")), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var subresources []string
			b := fake.NewClientBuilder().WithScheme(fakeScheme(t)).WithInterceptorFuncs(interceptor.Funcs{
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
					subresources = append(subresources, sub)
					if tt.resizeErr != nil {
						return tt.resizeErr
					}
					return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
				}})
			if !tt.gone {
				b = b.WithObjects(memberPod())
			}
			kube := b.Build()
			judged := memberPod()
			if !tt.gone {
				if err := kube.Get(ctx, client.ObjectKeyFromObject(judged), judged); err != nil {
					t.Fatal(err)
				}
			}
			r := &EtcdClusterReconciler{Client: kube}
			err := r.resizePod(ctx, ec, &observed{pods: map[string]*corev1.Pod{"c-0": judged}}, m)
			if (err != nil) != tt.wantErr {
				t.Fatalf("resizePod: %v, want error %v", err, tt.wantErr)
			}
			if len(subresources) != 1 || subresources[0] != "resize" {
				t.Errorf("patched subresources %v, want [resize]", subresources)
			}
			if tt.gone {
				return
			}
			var p corev1.Pod
			if err := kube.Get(ctx, client.ObjectKeyFromObject(judged), &p); err != nil {
				t.Fatal(err)
			}
			got := p.Spec.Containers[0].Resources
			if want := plan.EffectiveResources(target); tt.resized != equality.Semantic.DeepEqual(got, want) {
				t.Errorf("etcd resources %v (resized %v, want resized %v)", got, !tt.resized, tt.resized)
			}
			if s := p.Spec.Containers[1].Resources.Requests.Cpu(); s.Cmp(resource.MustParse("10m")) != 0 {
				t.Errorf("the sidecar was resized to %s", s)
			}
			note, ok := p.Annotations[stewardv1.AnnotationResizeRefused]
			if tt.refused == "" && ok {
				t.Errorf("refusal recorded: %q", note)
			}
			if tt.refused != "" && !strings.Contains(note, tt.refused) {
				t.Errorf("refusal %q, want it to say %q", note, tt.refused)
			}
		})
	}
	t.Run("no Pod", func(t *testing.T) {
		r := &EtcdClusterReconciler{Client: fake.NewClientBuilder().WithScheme(fakeScheme(t)).Build()}
		if err := r.resizePod(ctx, ec, &observed{pods: map[string]*corev1.Pod{}}, m); err == nil {
			t.Error("resizing a member with no Pod succeeded")
		}
	})
}

// recordPodTemplate records the observed template (with the member's own Pod metadata, which is
// patched apart) on the Pod first, then on the member; a Pod that went away does not stop the
// member's record, any other failure does.
func TestRecordPodTemplate(t *testing.T) {
	ctx := context.Background()
	target := stewardv1.MemberTemplate{Version: "3.6.16", PodMetadata: stewardv1.PodMetadata{Labels: map[string]string{"team": "new"}},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}
	ec := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
		Status: stewardv1.EtcdClusterStatus{Observed: &target}}
	member := func() *stewardv1.EtcdMember {
		return &stewardv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "c-0", Namespace: "ns"},
			Spec: stewardv1.EtcdMemberSpec{ClusterName: "c", Template: stewardv1.MemberTemplate{Version: "3.6.15",
				PodMetadata: stewardv1.PodMetadata{Labels: map[string]string{"team": "old"}}}}}
	}
	for _, tt := range []struct {
		name string
		// pod: the reconcile saw the Pod; stored: it is still there.
		pod, stored bool
		podErr      error
		wantErr     bool
		wantMember  bool
	}{
		{name: "Pod and member", pod: true, stored: true, wantMember: true},
		{name: "no Pod seen", wantMember: true},
		{name: "the Pod went away", pod: true, wantMember: true},
		{name: "the Pod's patch fails", pod: true, stored: true, podErr: errors.New("etcd timeout"), wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			objs := []client.Object{member()}
			if tt.stored {
				objs = append(objs, memberPod())
			}
			kube := fake.NewClientBuilder().WithScheme(fakeScheme(t)).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if _, ok := obj.(*corev1.Pod); ok && tt.podErr != nil {
						return tt.podErr
					}
					return c.Patch(ctx, obj, patch, opts...)
				}}).Build()
			m := member()
			if err := kube.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
				t.Fatal(err)
			}
			o := &observed{pods: map[string]*corev1.Pod{}}
			if tt.pod {
				p := memberPod()
				if tt.stored {
					if err := kube.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
						t.Fatal(err)
					}
				}
				o.pods["c-0"] = p
			}
			r := &EtcdClusterReconciler{Client: kube}
			if err := r.recordPodTemplate(ctx, ec, o, m); (err != nil) != tt.wantErr {
				t.Fatalf("recordPodTemplate: %v, want error %v", err, tt.wantErr)
			}
			var got stewardv1.EtcdMember
			if err := kube.Get(ctx, client.ObjectKeyFromObject(m), &got); err != nil {
				t.Fatal(err)
			}
			recorded := got.Spec.Template.Version == "3.6.16"
			if recorded != tt.wantMember {
				t.Errorf("member template %+v, want recorded %v", got.Spec.Template, tt.wantMember)
			}
			if recorded && (got.Spec.Template.PodMetadata.Labels["team"] != "old" || got.Spec.Template.Resources.Requests.Cpu().IsZero()) {
				t.Errorf("member template %+v: want the target with the member's own Pod metadata", got.Spec.Template)
			}
			if !tt.stored {
				return
			}
			var p corev1.Pod
			if err := kube.Get(ctx, client.ObjectKeyFromObject(memberPod()), &p); err != nil {
				t.Fatal(err)
			}
			pt := resources.PodTemplate(&p)
			if tt.wantErr {
				if pt != nil {
					t.Errorf("the Pod records %+v after a failed patch", pt)
				}
				return
			}
			if pt == nil || pt.Version != "3.6.16" || pt.Resources.Requests.Cpu().IsZero() {
				t.Errorf("the Pod records %+v, want the target", pt)
			}
		})
	}
}
