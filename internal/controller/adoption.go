package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/adoption"
	"github.com/etcd-steward/steward/internal/etcd"
	"github.com/etcd-steward/steward/internal/health"
	"github.com/etcd-steward/steward/internal/plan"
	"github.com/etcd-steward/steward/internal/resources"
)

// Adoption (spec.bootstrap.join): the controller reads the source and carries out the StatefulSet
// scale-down; internal/adoption judges the preflight and internal/plan decides every step.

// Least privilege: the StatefulSet is only read (its template and selector); its replicas change
// through the scale subresource, which can change nothing else.
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get
// +kubebuilder:rbac:groups=apps,resources=statefulsets/scale,verbs=get;update

// adopting: the cluster takes over a running one and has not finished (or aborted) yet.
func adopting(ec *stewardv1.EtcdCluster) bool { return (&plan.Facts{Cluster: ec}).Adopting() }

// joinSeeds are the source's endpoints the operator's client starts from while adopting: the live
// member list names the rest.
func joinSeeds(ec *stewardv1.EtcdCluster) []string {
	if !adopting(ec) {
		return nil
	}
	return ec.Spec.Bootstrap.Join.Endpoints
}

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get

// holdsTeardown: a deleted cluster mid-hand-over takes its members out of etcd one at a time
// first (the plan's abort); only then does the teardown run. Not in a namespace being deleted:
// the source goes with it, so the abort could never finish, and holding would keep the namespace
// Terminating for good. A namespace that cannot be read holds (it is read again next time).
func (r *EtcdClusterReconciler) holdsTeardown(ctx context.Context, ec *stewardv1.EtcdCluster) bool {
	if !adopting(ec) || ec.Status.Adoption == nil {
		return false
	}
	switch ec.Status.Adoption.Phase {
	case stewardv1.AdoptionHandingOver, stewardv1.AdoptionAborting:
	default:
		return false
	}
	var ns corev1.Namespace
	if err := r.reader().Get(ctx, client.ObjectKey{Name: ec.Namespace}, &ns); err == nil && ns.DeletionTimestamp != nil {
		return false
	}
	return true
}

// sourceEndpoints adds each source member's client URL to the endpoints, named plan.SourceName,
// so its status is read like a member's.
func sourceEndpoints(ec *stewardv1.EtcdCluster, o *observed, live []etcd.Member) {
	if !adopting(ec) {
		return
	}
	ours := map[string]bool{}
	for name := range o.members {
		ours[resources.PeerURL(ec, name)] = true
	}
	for _, m := range live {
		if slices.ContainsFunc(m.PeerURLs, func(u string) bool { return ours[u] }) || len(m.ClientURLs) == 0 {
			continue
		}
		o.endpoints[plan.SourceName(health.Member{ID: m.ID, Name: m.Name})] = m.ClientURLs[0]
	}
}

// specUnchanged re-reads the cluster past the cache right before a source member is removed, which
// cannot be undone: an abort, a deletion or any spec change written since the plan read the cluster
// sends the decision back to the planner.
func (r *EtcdClusterReconciler) specUnchanged(ctx context.Context, ec *stewardv1.EtcdCluster) error {
	var live stewardv1.EtcdCluster
	if err := r.reader().Get(ctx, client.ObjectKeyFromObject(ec), &live); err != nil {
		return err
	}
	if live.Generation != ec.Generation || live.DeletionTimestamp != nil {
		return errRetry
	}
	return nil
}

// adoptionFacts reads the source's StatefulSet and, until the hand-over starts, runs the preflight.
func (r *EtcdClusterReconciler) adoptionFacts(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed,
	takenServices []string) (*plan.Adoption, error) {
	if !adopting(ec) {
		return nil, nil
	}
	out := &plan.Adoption{}
	set, err := r.sourceSet(ctx, ec)
	if err != nil {
		return nil, err
	}
	if set != nil {
		out.StatefulSet = &set.facts
	}
	if o.facts.HandOverStarted() {
		return out, nil
	}
	src := adoption.Source{Etcd: o.facts.Etcd, Names: map[uint64]string{}}
	for _, m := range o.facts.Etcd.Members {
		src.Names[m.ID] = plan.SourceName(m)
	}
	if set != nil {
		src.StatefulSet = &adoption.StatefulSet{Name: set.facts.Name, Found: set.facts.Found, Replicas: set.facts.Replicas,
			PreStop: set.preStop}
		for _, p := range set.facts.Pods {
			src.StatefulSet.Pods = append(src.StatefulSet.Pods, p.Name)
		}
	}
	if o.tls != nil {
		src.CA = o.tls.sourceCA
	}
	if o.client == nil {
		src.AuthErr = "no client"
	} else if src.AuthEnabled, err = o.client.AuthEnabled(ctx); err != nil {
		src.AuthErr = err.Error()
	}
	if seeds := joinSeeds(ec); !o.facts.Etcd.MemberListKnown() && o.client != nil && len(seeds) > 0 {
		src.SeedErr = errText(o.client.Status(ctx, seeds[0]).Err)
	}
	out.Checks = adoption.Preflight(src, adoptionTarget(ec, len(o.facts.Etcd.Members), takenServices))
	return out, nil
}

func adoptionTarget(ec *stewardv1.EtcdCluster, sources int, taken []string) adoption.Target {
	t := adoption.Target{Version: ec.Spec.Version, PeerScheme: resources.PeerScheme(ec), QuotaBytes: adoption.DefaultQuotaBytes,
		TakenServices: taken}
	if q := ec.Spec.Options.QuotaBackendBytes; q != nil {
		t.QuotaBytes = q.Value()
	}
	replicas := 3
	if ec.Spec.Replicas != nil {
		replicas = int(*ec.Spec.Replicas)
	}
	for i := range replicas + sources + 1 {
		t.MemberNames = append(t.MemberNames, fmt.Sprintf("%s-%d", ec.Name, i))
	}
	return t
}

type sourceSet struct {
	facts   plan.SourceSet
	preStop bool
}

// sourceSet reads the named StatefulSet and its Pods live (Steward caches no StatefulSets).
func (r *EtcdClusterReconciler) sourceSet(ctx context.Context, ec *stewardv1.EtcdCluster) (*sourceSet, error) {
	name := ec.Spec.Bootstrap.Join.StatefulSetName
	if name == "" {
		return nil, nil
	}
	out := &sourceSet{facts: plan.SourceSet{Name: name}}
	var sts appsv1.StatefulSet
	err := r.reader().Get(ctx, client.ObjectKey{Namespace: ec.Namespace, Name: name}, &sts)
	switch {
	case apierrors.IsNotFound(err):
		return out, nil
	case err != nil:
		return nil, err
	}
	out.facts.Found = true
	out.facts.Replicas = 1
	if sts.Spec.Replicas != nil {
		out.facts.Replicas = *sts.Spec.Replicas
	}
	for _, c := range sts.Spec.Template.Spec.Containers {
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
			out.preStop = true
		}
	}
	if sts.Spec.Selector == nil {
		return out, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
	if err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := r.reader().List(ctx, &pods, client.InNamespace(ec.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if metav1.IsControlledBy(p, &sts) {
			out.facts.Pods = append(out.facts.Pods, plan.SourcePod{Name: p.Name, Deleting: p.DeletionTimestamp != nil})
		}
	}
	slices.SortFunc(out.facts.Pods, func(a, b plan.SourcePod) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// scaleSource scales the source StatefulSet down by one through its scale subresource, only from
// the replicas the plan saw (a StatefulSet someone else changed meanwhile is planned again); the
// update carries the resourceVersion it read, so a change in between is a conflict, not lost.
func (r *EtcdClusterReconciler) scaleSource(ctx context.Context, ec *stewardv1.EtcdCluster, a plan.Action) error {
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ec.Namespace, Name: ec.Spec.Bootstrap.Join.StatefulSetName}}
	scale := &autoscalingv1.Scale{}
	if err := r.Client.SubResource("scale").Get(ctx, sts, scale); err != nil {
		return err
	}
	if scale.Spec.Replicas != a.SourceReplicas+1 {
		return errRetry
	}
	scale.Spec.Replicas = a.SourceReplicas
	return r.Client.SubResource("scale").Update(ctx, sts, client.WithSubResourceBody(scale))
}
