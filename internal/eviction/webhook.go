package eviction

import (
	"context"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// Path is where the operator serves the eviction webhook.
const Path = "/validate-eviction"

// The webhook configuration (config/webhook, generated from this marker; the chart renders the
// same): pods/eviction CREATE only, failurePolicy Ignore and a short timeout, so a Steward that is
// down or slow never holds a drain (the PodDisruptionBudget still guards quorum). No object selector
// can narrow it: the object of an eviction request is the Eviction, which carries no labels, so
// the handler tells member Pods from the rest, from the operator's cache of Steward's Pods alone.
// sideEffects NoneOnDryRun: the request is recorded on the Pod, except for a dry run.
// +kubebuilder:webhook:path=/validate-eviction,mutating=false,failurePolicy=ignore,sideEffects=NoneOnDryRun,groups="",resources=pods/eviction,verbs=create,versions=v1,name=eviction.etcd.steward.dev,admissionReviewVersions=v1,timeoutSeconds=5,matchPolicy=Equivalent

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch

// Handler answers eviction requests: it reads the Pod (from the manager's cache, which holds only
// Steward's member Pods) and its siblings, records a first request on the Pod, and answers from
// Decide. It does no long work: the reconciler, enqueued by the Pod's change, prepares the member.
type Handler struct {
	// Reader reads Pods and EtcdMembers (the manager's cache); Writer records requests.
	Reader client.Reader
	Writer client.Writer
	// Bound is how long an eviction waits for its member to be prepared (DefaultBound when zero).
	Bound time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Handle implements admission.Handler.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	now := time.Now()
	if h.Now != nil {
		now = h.Now()
	}
	if req.Operation != admissionv1.Create || req.SubResource != "eviction" {
		return admission.Allowed("not an eviction")
	}
	pod := &corev1.Pod{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: req.Name}, pod); err != nil {
		// Not a Pod Steward caches (no member's), or unreadable: the PodDisruptionBudget decides.
		return admission.Allowed("not a Steward member's Pod")
	}
	f, err := h.facts(ctx, pod, now)
	if err != nil {
		log.FromContext(ctx).Error(err, "reading the eviction's cluster; leaving it to the PodDisruptionBudget", "pod", req.Name)
		return admission.Allowed("Steward could not read the member's cluster: the PodDisruptionBudget decides")
	}
	a := Decide(f)
	if a.Record && !ptrTrue(req.DryRun) {
		if err := h.record(ctx, pod, now); err != nil {
			log.FromContext(ctx).Error(err, "recording an eviction request", "pod", req.Name)
		}
	}
	log.FromContext(ctx).V(1).Info("eviction", "pod", req.Name, "namespace", req.Namespace, "allowed", a.Allowed, "why", a.Message)
	if a.Allowed {
		return admission.Allowed(a.Message)
	}
	return TooManyRequests(a.Message)
}

// TooManyRequests is a refusal kubectl drain retries (every 5 s) rather than gives up on.
func TooManyRequests(msg string) admission.Response {
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusTooManyRequests, Reason: metav1.StatusReasonTooManyRequests, Message: msg,
	}}}
}

// facts reads what Decide needs: the member, its request, its siblings' state and its role.
func (h *Handler) facts(ctx context.Context, pod *corev1.Pod, now time.Time) (Facts, error) {
	cluster, member := pod.Labels[stewardv1.LabelCluster], pod.Labels[stewardv1.LabelMember]
	if cluster == "" || member == "" {
		return Facts{Now: now}, nil
	}
	f := Facts{Member: member, RequestedAt: RequestedAt(pod), Prepared: Prepared(pod, now), Now: now, Bound: h.Bound}
	var m stewardv1.EtcdMember
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: member}, &m); err == nil {
		f.Leader = m.Status.Role == stewardv1.RoleLeader
	}
	var ec stewardv1.EtcdCluster
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: cluster}, &ec); err == nil {
		// The planner replaces a ready member add-first; one that is not ready is prepared and
		// evicted as any other (etcd would refuse the successor's add).
		f.AddFirst = ec.Spec.MaxSurge() > 0 && ready(pod)
	}
	var pods corev1.PodList
	if err := h.Reader.List(ctx, &pods, client.InNamespace(pod.Namespace), client.MatchingLabels{stewardv1.LabelCluster: cluster}); err != nil {
		return Facts{}, err
	}
	for i := range pods.Items {
		o := &pods.Items[i]
		name := o.Labels[stewardv1.LabelMember]
		if name == "" || name == member {
			continue
		}
		f.Others = append(f.Others, Other{Name: name, Down: o.DeletionTimestamp != nil || !ready(o), Evicting: Prepared(o, now)})
	}
	return f, nil
}

// record writes the first request of an eviction on the Pod, before the answer (crash safety:
// the reconciler and the next retry read it from there).
func (h *Handler) record(ctx context.Context, pod *corev1.Pod, now time.Time) error {
	base := pod.DeepCopy()
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[stewardv1.AnnotationEvictionRequested] = now.UTC().Format(time.RFC3339Nano)
	delete(pod.Annotations, stewardv1.AnnotationEvictionPrepared) // a mark of an expired request
	return h.Writer.Patch(ctx, pod, client.MergeFrom(base))
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func ptrTrue(b *bool) bool { return b != nil && *b }
