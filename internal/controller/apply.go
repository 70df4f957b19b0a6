package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/etcd"
	"github.com/etcd-steward/steward/internal/plan"
	"github.com/etcd-steward/steward/internal/resources"
	"github.com/etcd-steward/steward/internal/tlsplan"
)

// errRetry marks an expected "not yet" (a learner still catching up): come back soon, log quietly.
var errRetry = errors.New("not yet")

// apply carries out one planned action. Where the action writes intent, the intent is written
// first, so an operator stopped between the two resumes from the live member list.
func (r *EtcdClusterReconciler) apply(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed, a plan.Action) error {
	m := o.members[a.Member]
	// An etcd member no EtcdMember claims (an orphan) can still be removed or lose leadership.
	orphan := m == nil && a.MemberID != 0 && a.Kind.OrphanAllowed()
	if a.Kind.NeedsMember() && m == nil && !orphan {
		return fmt.Errorf("%s: member %q not found", a.Kind, a.Member)
	}
	if a.Kind == plan.Defragment {
		return r.defragment(ctx, ec, o, m, a)
	}
	if a.Kind.Recovery() {
		return r.applyRecovery(ctx, ec, o, a)
	}
	if a.Disruption != nil {
		if a.Kind == plan.RemoveMember && m == nil && adopting(ec) {
			if err := r.specUnchanged(ctx, ec); err != nil {
				return err
			}
		}
		if a.Kind == plan.RemoveMember && m != nil {
			if err := r.writePhaseElsewhere(ctx, m, stewardv1.MemberRemoving, m.Status.ID, a.Replacing, a.ReplacedElsewhere); err != nil {
				return err
			}
		}
		d := disruption.New(effects{r: r, o: o, ec: ec})
		return d.Do(ctx, o.facts.DisruptionView(), *a.Disruption)
	}
	switch a.Kind {
	case plan.Nothing, plan.Wait:
		return nil
	case plan.AdoptSpec:
		ec.Status.Observed = targetFromSpec(ec)
		return nil
	case plan.CreateMember:
		return r.createMember(ctx, ec, a.Member, a.Ordinal)
	case plan.BootstrapSeed:
		self := a.Member + "=" + resources.PeerURL(ec, a.Member)
		return r.startPod(ctx, ec, o, m, resources.Bootstrap{InitialCluster: self, State: resources.StateNew}, true)
	case plan.CreatePod:
		boot := resources.Bootstrap{InitialCluster: initialCluster(ec, o, m), State: resources.StateExisting}
		if a.ForceNewCluster {
			// etcd reads its membership from the data it has; the flag rewrites it to this member.
			boot.InitialCluster, boot.ForceNewCluster = a.Member+"="+resources.PeerURL(ec, a.Member), true
		}
		return r.startPod(ctx, ec, o, m, boot, m.Status.Phase == stewardv1.MemberRunning)
	case plan.AddLearner:
		if err := r.setPhase(ctx, m, stewardv1.MemberJoining, ""); err != nil {
			return err
		}
		if o.client == nil {
			return errors.New("no etcd client to add a learner")
		}
		added, _, err := o.client.AddLearner(ctx, resources.PeerURL(ec, m.Name))
		if errors.Is(err, etcd.ErrClusterNotSettled) {
			return errRetry
		}
		if err != nil {
			return err
		}
		return r.setPhase(ctx, m, stewardv1.MemberLearner, etcd.IDString(added.ID))
	case plan.PromoteLearner:
		if o.client == nil {
			return errors.New("no etcd client to promote a learner")
		}
		if err := o.client.Promote(ctx, a.MemberID); errors.Is(err, etcd.ErrLearnerNotReady) {
			return errRetry
		} else if err != nil {
			return err
		}
		return r.setPhase(ctx, m, stewardv1.MemberRunning, etcd.IDString(a.MemberID))
	case plan.RecordPhase:
		id := m.Status.ID
		if a.MemberID != 0 {
			id = etcd.IDString(a.MemberID)
		}
		return r.writePhase(ctx, m, a.Phase, id, a.Replacing)
	case plan.ResetMember:
		if err := r.recordTemplate(ctx, m, *ec.Status.Observed); err != nil {
			return err
		}
		return r.setPhase(ctx, m, stewardv1.MemberPending, "")
	case plan.DeleteMember:
		return client.IgnoreNotFound(r.Client.Delete(ctx, m))
	case plan.DetachMember:
		// Like a quorum recovery's dropped member: the PVC is kept, detached, its ordinal reserved.
		r.event(ec, corev1.EventTypeNormal, string(a.Reason), "%s", a.Message)
		return r.discardMember(ctx, ec, o, m.Name)
	case plan.FinalizeMember:
		return r.removeFinalizer(ctx, m)
	case plan.MoveLeader:
		ep, ok := o.endpoints[a.Member]
		for _, e := range o.facts.Etcd.Endpoints {
			if !ok && e.Reachable && e.MemberID == a.MemberID {
				ep, ok = o.endpoints[e.Member]
			}
		}
		if !ok || o.client == nil {
			return fmt.Errorf("no endpoint for leader %s", a.Member)
		}
		return o.client.MoveLeader(ctx, ep, a.TargetID)
	case plan.RecordDefragmentation:
		return r.recordInterrupted(ctx, o, m)
	case plan.Compact:
		return r.compact(ctx, ec, o, a)
	case plan.DisarmAlarm:
		return r.disarm(ctx, ec, o, a)
	case plan.ResizePod:
		return r.resizePod(ctx, ec, o, m)
	case plan.RecordTemplate:
		return r.recordPodTemplate(ctx, ec, o, m)
	case plan.PatchPodMetadata:
		return r.patchPodMetadata(ctx, ec, o, m)
	case plan.ExpandPVC:
		return r.expandPVC(ctx, ec, o, m)
	case plan.ScaleSource:
		return r.scaleSource(ctx, ec, a)
	case plan.Downgrade:
		return r.downgrade(ctx, ec, o, a)
	case plan.StartHandOver:
		return nil // its effect is status.adoption, written with the decision (intentOnly)
	case plan.Authenticate:
		return r.authenticate(ctx, ec, o, *a.Auth)
	}
	return fmt.Errorf("action %s has no implementation", a.Kind)
}

// targetFromSpec is the member template of the spec, as the planner adopts it. (Members are not
// outdated by retentionPolicy: plan.Compare ignores it.)
func targetFromSpec(ec *stewardv1.EtcdCluster) *stewardv1.MemberTemplate {
	return ec.Spec.MemberTemplate.DeepCopy()
}

func (r *EtcdClusterReconciler) createMember(ctx context.Context, ec *stewardv1.EtcdCluster, name string, ordinal int32) error {
	m := &stewardv1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ec.Namespace, Labels: map[string]string{
			stewardv1.LabelCluster: ec.Name, resources.LabelManagedBy: "steward"},
			Finalizers: []string{stewardv1.FinalizerMember}},
		Spec: stewardv1.EtcdMemberSpec{ClusterName: ec.Name, Ordinal: ordinal, Template: *ec.Status.Observed.DeepCopy()},
	}
	if err := controllerutil.SetControllerReference(ec, m, r.Client.Scheme()); err != nil {
		return err
	}
	err := r.Client.Create(ctx, m)
	if apierrors.IsAlreadyExists(err) {
		return nil // created by a run that stopped before recording it: same object, same intent
	}
	return err
}

// initialCluster is --initial-cluster for a joining member, from the live member list. A learner
// added but not yet started has no name in etcd; that is the joiner itself.
func initialCluster(ec *stewardv1.EtcdCluster, o *observed, m *stewardv1.EtcdMember) string {
	self := resources.PeerURL(ec, m.Name)
	var parts []string
	for _, lm := range o.facts.Etcd.Members {
		name := lm.Name
		for _, u := range lm.PeerURLs {
			if u == self {
				name = m.Name
			}
		}
		if name == "" || len(lm.PeerURLs) == 0 {
			continue
		}
		parts = append(parts, name+"="+lm.PeerURLs[0])
	}
	return strings.Join(parts, ",")
}

// startPod records the target template on the member, makes sure its PVC exists, and creates its
// Pod. The Pod is built from the member's recorded template, never from the spec directly.
func (r *EtcdClusterReconciler) startPod(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed,
	m *stewardv1.EtcdMember, boot resources.Bootstrap, voter bool) error {
	member := resources.Member{Cluster: ec, Name: m.Name, Template: &m.Spec.Template, Bootstrap: boot, Voter: voter}
	// First, before anything is written: no Pod at all rather than one whose etcd skips the check.
	if err := r.withDataCheck(ctx, ec, o, m, &member); err != nil {
		return fmt.Errorf("no Pod for %s without the data check: %w", m.Name, err)
	}
	if err := r.recordTemplate(ctx, m, *ec.Status.Observed); err != nil {
		return err
	}
	if pvc := resources.PVC(ec, m.Name, &m.Spec.Template); pvc != nil && o.pvcs[pvc.Name] == nil {
		pvc.Annotations = map[string]string{stewardv1.AnnotationClusterUID: string(ec.UID)}
		err := r.Client.Create(ctx, pvc)
		if apierrors.IsAlreadyExists(err) {
			err = r.ownPVC(ctx, ec, pvc.Namespace, pvc.Name)
		}
		if err != nil {
			return err
		}
	}
	if ec.TLSEnabled() {
		// The Pod records the trust its Secret holds now, which is what its etcd will load; no
		// Secret yet means the certificate step has not issued it: fail closed, come back.
		s := o.tls.secrets[m.Name]
		ms := (*tlsplan.MemberSecret)(nil)
		if s != nil {
			ms = parseMemberSecret(s)
		}
		if ms == nil {
			return errRetry
		}
		member.Trust = tlsplan.FormatPlaneTrust(ms.Trust, ms.ClientBundle())
	}
	pod := resources.Pod(member, r.EtcdImageRepository)
	if boot.State == resources.StateNew && o.restore != nil {
		if o.restore.hold != "" {
			return errors.New(o.restore.hold)
		}
		if err := r.withRestore(ctx, ec, pod, o.restore, boot.InitialCluster); err != nil {
			return err
		}
	}
	if err := controllerutil.SetControllerReference(m, pod, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func (r *EtcdClusterReconciler) recordTemplate(ctx context.Context, m *stewardv1.EtcdMember, t stewardv1.MemberTemplate) error {
	if equality.Semantic.DeepEqual(m.Spec.Template, t) {
		return nil
	}
	base := m.DeepCopy()
	m.Spec.Template = *t.DeepCopy()
	return r.Client.Patch(ctx, m, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// setPhase writes the member's phase (the intent record) and its etcd ID.
func (r *EtcdClusterReconciler) setPhase(ctx context.Context, m *stewardv1.EtcdMember, phase stewardv1.MemberPhase, id string) error {
	return r.writePhase(ctx, m, phase, id, false)
}

// writePhase is setPhase that can also start a replacement: status.replacing is set with the intent
// (replacing=true), kept through the member's rebirth, and cleared once it is Running again.
func (r *EtcdClusterReconciler) writePhase(ctx context.Context, m *stewardv1.EtcdMember, phase stewardv1.MemberPhase,
	id string, replacing bool) error {
	return r.writePhaseElsewhere(ctx, m, phase, id, replacing, "")
}

// writePhaseElsewhere is writePhase that can also record, with the intent, that the member is
// replaced elsewhere under a new name (a node loss: status.replacedElsewhere), kept until the
// member is dropped, and cleared when it is Running again (a replacement withdrawn).
func (r *EtcdClusterReconciler) writePhaseElsewhere(ctx context.Context, m *stewardv1.EtcdMember, phase stewardv1.MemberPhase,
	id string, replacing bool, elsewhere string) error {
	replacing = phase != stewardv1.MemberRunning && (replacing || m.Status.Replacing)
	if elsewhere == "" {
		elsewhere = m.Status.ReplacedElsewhere
	}
	if phase == stewardv1.MemberRunning {
		elsewhere = ""
	}
	if m.Status.Phase == phase && m.Status.ID == id && m.Status.PhaseSince != nil && m.Status.Replacing == replacing &&
		m.Status.ReplacedElsewhere == elsewhere {
		return nil
	}
	base := m.DeepCopy()
	if m.Status.Phase != phase || m.Status.PhaseSince == nil {
		now := metav1.NewTime(r.now())
		m.Status.PhaseSince = &now
	}
	m.Status.Phase, m.Status.ID, m.Status.Replacing, m.Status.ReplacedElsewhere = phase, id, replacing, elsewhere
	return r.Client.Status().Patch(ctx, m, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

func (r *EtcdClusterReconciler) removeFinalizer(ctx context.Context, m *stewardv1.EtcdMember) error {
	if !controllerutil.ContainsFinalizer(m, stewardv1.FinalizerMember) {
		return nil
	}
	base := m.DeepCopy()
	controllerutil.RemoveFinalizer(m, stewardv1.FinalizerMember)
	return client.IgnoreNotFound(r.Client.Patch(ctx, m, client.MergeFrom(base)))
}

// patchPodMetadata moves a Pod's labels and annotations to the target's podMetadata in place: keys
// the old template added and the new one dropped are removed; keys others set are left alone.
func (r *EtcdClusterReconciler) patchPodMetadata(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed, m *stewardv1.EtcdMember) error {
	target := ec.Status.Observed.PodMetadata
	if p := o.pods[m.Name]; p != nil {
		base := p.DeepCopy()
		old := m.Spec.Template.PodMetadata
		p.Labels = moveKeys(p.Labels, old.Labels, target.Labels)
		p.Annotations = moveKeys(p.Annotations, old.Annotations, target.Annotations)
		// Steward's own labels win over the user's, as when the Pod was built.
		voter := p.Labels[stewardv1.LabelVoter] == "true"
		maps.Copy(p.Labels, resources.MemberLabels(ec.Name, m.Name, &stewardv1.MemberTemplate{}, voter))
		if err := r.Client.Patch(ctx, p, client.MergeFrom(base)); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	t := *m.Spec.Template.DeepCopy()
	t.PodMetadata = *target.DeepCopy()
	return r.recordTemplate(ctx, m, t)
}

func moveKeys(current, old, target map[string]string) map[string]string {
	out := maps.Clone(current)
	if out == nil {
		out = map[string]string{}
	}
	for k := range old {
		if _, keep := target[k]; !keep {
			delete(out, k)
		}
	}
	maps.Copy(out, target)
	return out
}

// expandPVC raises the PVC's request to the target size; the storage driver does the rest.
func (r *EtcdClusterReconciler) expandPVC(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed, m *stewardv1.EtcdMember) error {
	size := ec.Status.Observed.Storage.Size
	p := o.pvcs[resources.PVCName(m.Name)]
	if size == nil || p == nil {
		return nil
	}
	if cur := p.Spec.Resources.Requests[corev1.ResourceStorage]; cur.Cmp(*size) < 0 {
		base := p.DeepCopy()
		if p.Spec.Resources.Requests == nil {
			p.Spec.Resources.Requests = corev1.ResourceList{}
		}
		p.Spec.Resources.Requests[corev1.ResourceStorage] = *size
		if err := r.Client.Patch(ctx, p, client.MergeFrom(base)); err != nil {
			return err
		}
	}
	t := *m.Spec.Template.DeepCopy()
	t.Storage.Size = size
	return r.recordTemplate(ctx, m, t)
}

// ownPVC checks, live, that an existing PVC under a new member's name is this cluster's own (made
// by an earlier try of this step): never start a member on a PVC kept from another member (a
// detached one, or another cluster's of the same name), whose data is not the new member's.
func (r *EtcdClusterReconciler) ownPVC(ctx context.Context, ec *stewardv1.EtcdCluster, ns, name string) error {
	var pvc corev1.PersistentVolumeClaim
	if err := r.reader().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pvc); err != nil {
		return err
	}
	if pvc.Labels[stewardv1.LabelCluster] != ec.Name || pvc.Annotations[stewardv1.AnnotationClusterUID] != string(ec.UID) {
		return fmt.Errorf("PVC %s exists and is not this member's (kept from a replaced member, or another cluster's): "+
			"refusing to start a member on it", name)
	}
	return nil
}
