// Package controller holds Steward's reconcilers: they gather facts, ask the planner for the next
// single action, apply it and record it. Decisions live in the planner, not here.
package controller

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// EtcdClusterReconciler reconciles EtcdCluster objects.
type EtcdClusterReconciler struct {
	Client   client.Client
	Recorder recorder.EventRecorder
	// EtcdImageRepository is used when a cluster sets no image (tag v<version>).
	EtcdImageRepository string
}

// The operator's permissions, generated into config/rbac by controller-gen.
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdclusters;etcdmembers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdclusters/status;etcdmembers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdclusters/finalizers;etcdmembers/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods;persistentvolumeclaims;services;secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete

// Reconcile is a stub until the lifecycle work lands: it only confirms the object is readable.
func (r *EtcdClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ec stewardv1.EtcdCluster
	if err := r.Client.Get(ctx, req.NamespacedName, &ec); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log.FromContext(ctx).V(1).Info("observed", "generation", ec.Generation)
	return ctrl.Result{}, nil
}

// SetupWithManager registers the reconciler and what it watches.
func (r *EtcdClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&stewardv1.EtcdCluster{}).
		Owns(&stewardv1.EtcdMember{}).
		Named("etcdcluster").
		Complete(r)
}
