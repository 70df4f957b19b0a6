package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
)

func (r *EtcdClusterReconciler) ensureFinalizer(ctx context.Context, ec *stewardv1.EtcdCluster) error {
	if controllerutil.ContainsFinalizer(ec, stewardv1.FinalizerTeardown) {
		return nil
	}
	base := ec.DeepCopy()
	controllerutil.AddFinalizer(ec, stewardv1.FinalizerTeardown)
	return r.Client.Patch(ctx, ec, client.MergeFrom(base))
}

// ensureServices keeps the peer and client Services and the PDB as built from the spec (the PDB
// also from the voter Pods there are: see resources.PDB). None of them disrupts a member, so they
// are kept in shape on every reconcile rather than planned.
//
// A Service of the same name that is not this cluster's (a Helm release's, another operator's) is
// never patched: its selector would start routing its clients to Steward's members. Its name comes
// back in taken, for the adoption preflight and a Warning event. A PDB of the cluster's name that
// is not its own is neither patched nor deleted, and says so in a Warning event.
func (r *EtcdClusterReconciler) ensureServices(ctx context.Context, ec *stewardv1.EtcdCluster) (taken []string, err error) {
	for _, want := range []*corev1.Service{resources.PeerService(ec), resources.ClientService(ec)} {
		var have corev1.Service
		found, err := r.getUncached(ctx, client.ObjectKeyFromObject(want), &have)
		if err != nil {
			return nil, err
		}
		if found && !metav1.IsControlledBy(&have, ec) {
			taken = append(taken, want.Name)
			continue
		}
		svc := &corev1.Service{ObjectMeta: want.ObjectMeta}
		_, err = controllerutil.CreateOrPatch(ctx, r.Client, svc, func() error {
			svc.Labels = want.Labels
			svc.Spec.Selector = want.Spec.Selector
			svc.Spec.Ports = want.Spec.Ports
			svc.Spec.PublishNotReadyAddresses = want.Spec.PublishNotReadyAddresses
			if svc.CreationTimestamp.IsZero() {
				svc.Spec.ClusterIP = want.Spec.ClusterIP
				svc.Spec.Type = want.Spec.Type
			}
			return controllerutil.SetControllerReference(ec, svc, r.Client.Scheme())
		})
		if err != nil {
			return nil, fmt.Errorf("service %s: %w", want.Name, err)
		}
	}
	return taken, r.ensurePDB(ctx, ec)
}

// ensurePDB keeps the cluster's PodDisruptionBudget as built from the spec and the voter Pods there
// are. The budget counts the Pods its selector matches: the voter Pods there are now.
func (r *EtcdClusterReconciler) ensurePDB(ctx context.Context, ec *stewardv1.EtcdCluster) error {
	var voters corev1.PodList
	sel := resources.SelectorLabels(ec.Name)
	sel[stewardv1.LabelVoter] = "true"
	if err := r.Client.List(ctx, &voters, client.InNamespace(ec.Namespace), client.MatchingLabels(sel)); err != nil {
		return err
	}
	want := resources.PDB(ec, len(voters.Items))
	var have policyv1.PodDisruptionBudget
	found, err := r.getUncached(ctx, client.ObjectKey{Namespace: ec.Namespace, Name: resources.PDBName(ec.Name)}, &have)
	switch {
	case err != nil:
		return err
	case found && !metav1.IsControlledBy(&have, ec):
		r.event(ec, corev1.EventTypeWarning, "PodDisruptionBudgetNameTaken", "PodDisruptionBudget %s exists and is not this "+
			"cluster's: Steward leaves it alone, and its members have no budget of their own; name the EtcdCluster differently", have.Name)
		return nil
	case want == nil && found:
		// Only the object read: one of the same name created since is not ours to delete.
		return client.IgnoreNotFound(r.Client.Delete(ctx, &have, client.Preconditions{UID: &have.UID}))
	case want == nil:
		return nil
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: want.ObjectMeta}
	_, err = controllerutil.CreateOrPatch(ctx, r.Client, pdb, func() error {
		pdb.Labels = want.Labels
		pdb.Spec = want.Spec
		return controllerutil.SetControllerReference(ec, pdb, r.Client.Scheme())
	})
	return err
}

// getUncached reads an object the cache may not hold: Services and PDBs are cached only when they
// carry Steward's cluster label (an operator in a big cluster must not hold every Service), so one
// the cache does not have may still exist, without the label, as someone else's. Only then is the
// API server asked; a settled cluster's own objects are read from the cache.
func (r *EtcdClusterReconciler) getUncached(ctx context.Context, key client.ObjectKey, obj client.Object) (bool, error) {
	err := r.Client.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, obj)
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// syncVoterLabels keeps each Pod's voter label equal to what etcd's member list says, so the client
// Service follows promotions and removals even across an operator restart. Metadata only.
func (r *EtcdClusterReconciler) syncVoterLabels(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed) error {
	if !o.facts.Etcd.MemberListKnown() {
		return nil
	}
	for name, p := range o.pods {
		if err := r.clearExpiredEviction(ctx, p); err != nil {
			return err
		}
		lm, listed := o.facts.Etcd.Match(name, resources.PeerURL(ec, name))
		want := "false"
		if listed && !lm.IsLearner {
			want = "true"
		}
		if p.Labels[stewardv1.LabelVoter] == want || p.DeletionTimestamp != nil || stillDraining(p, r.now()) ||
			(want == "true" && evictionHeld(p, r.now())) {
			continue
		}
		base := p.DeepCopy()
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[stewardv1.LabelVoter] = want
		if err := r.Client.Patch(ctx, p, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// teardown runs when the cluster is deleted: members leave together (no MemberRemove one by one,
// the whole cluster goes), their finalizers are released, and PVCs follow the retention policy.
// Pods, members, Services and the PDB go by garbage collection through owner references.
func (r *EtcdClusterReconciler) teardown(ctx context.Context, ec *stewardv1.EtcdCluster) error {
	var members stewardv1.EtcdMemberList
	if err := r.Client.List(ctx, &members, client.InNamespace(ec.Namespace)); err != nil {
		return err
	}
	for i := range members.Items {
		if m := &members.Items[i]; m.Spec.ClusterName == ec.Name {
			if err := r.removeFinalizer(ctx, m); err != nil {
				return err
			}
		}
	}
	if ec.Spec.Storage.RetentionPolicy == stewardv1.RetentionDelete {
		var pvcs corev1.PersistentVolumeClaimList
		if err := r.Client.List(ctx, &pvcs, client.InNamespace(ec.Namespace),
			client.MatchingLabels{stewardv1.LabelCluster: ec.Name}); err != nil {
			return err
		}
		for i := range pvcs.Items {
			p := &pvcs.Items[i]
			// Only this incarnation's data: a PVC kept from an earlier cluster of the same name is
			// not ours to delete.
			if p.Annotations[stewardv1.AnnotationClusterUID] != string(ec.UID) {
				continue
			}
			if err := r.Client.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	if r.Etcd != nil {
		r.Etcd.Forget(string(ec.UID))
		r.certificatesApplied.Delete(ec.UID)
		r.authPhases.forget(ec.UID)
	}
	base := ec.DeepCopy()
	controllerutil.RemoveFinalizer(ec, stewardv1.FinalizerTeardown)
	if err := r.Client.Patch(ctx, ec, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
