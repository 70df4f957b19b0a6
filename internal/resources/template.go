package resources

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/api/equality"

	corev1 "k8s.io/api/core/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func templateAnnotation(t *stewardv1.MemberTemplate) string {
	c := t.DeepCopy()
	c.PodMetadata = stewardv1.PodMetadata{}
	b, err := json.Marshal(c)
	if err != nil {
		return "" // a MemberTemplate always marshals; an empty value reads back as "unknown"
	}
	return string(b)
}

// PodTemplate returns the member template a Pod was built from, or nil when the Pod does not say
// (built by an older Steward) or says something unreadable.
func PodTemplate(p *corev1.Pod) *stewardv1.MemberTemplate {
	s, ok := p.Annotations[stewardv1.AnnotationTemplate]
	if !ok || s == "" {
		return nil
	}
	var t stewardv1.MemberTemplate
	if err := json.Unmarshal([]byte(s), &t); err != nil {
		return nil
	}
	return &t
}

// SetPodTemplate records on a Pod the member template it runs now, after an in-place change (a
// resize) brought it there without a rebuild.
func SetPodTemplate(p *corev1.Pod, t *stewardv1.MemberTemplate) {
	p.Annotations = withKey(p.Annotations, stewardv1.AnnotationTemplate, templateAnnotation(t))
}

// ImageOnly says whether the Pod built for template to differs from the one built for from only in
// the etcd container's image (labels and annotations aside, which are patched in place). The
// kubelet then restarts the container on the new image in its running Pod. A version step that
// changes flags or probes (3.5 to 3.6) is not image-only; a patch release or a registry move is.
func ImageOnly(m Member, from, to *stewardv1.MemberTemplate, imageRepository string) bool {
	a, b := m, m
	a.Template, b.Template = from, to
	pa, pb := Pod(a, imageRepository), Pod(b, imageRepository)
	if pa.Spec.Containers[0].Image == pb.Spec.Containers[0].Image {
		return false
	}
	pa.Spec.Containers[0].Image = pb.Spec.Containers[0].Image
	return equality.Semantic.DeepEqual(pa.Spec, pb.Spec)
}
