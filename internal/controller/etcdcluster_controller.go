// Package controller holds Steward's reconciler: it gathers facts, asks the planner for the next
// single action, applies it and records it. Decisions live in internal/plan, not here.
package controller

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/etcd-steward/steward/internal/authplan"

	"github.com/etcd-steward/steward/internal/metrics"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/etcd"
	"github.com/etcd-steward/steward/internal/failpoint"
	"github.com/etcd-steward/steward/internal/fairqueue"
	"github.com/etcd-steward/steward/internal/plan"
)

// Requeue delays. etcd's recovery shows in no Kubernetes object the controller watches, so after
// an action, and while waiting, it comes back on a timer.
const (
	afterAction  = time.Second
	whileWaiting = time.Second
	whenSettled  = 30 * time.Second
)

// EtcdClusterReconciler reconciles EtcdCluster objects and, through them, their members.
type EtcdClusterReconciler struct {
	Client client.Client
	// APIReader reads what the cache does not hold (the user's TLS Secrets); nil means Client.
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	// Etcd caches one etcd client per cluster.
	Etcd *etcd.Pool
	// EtcdImageRepository is used when a cluster sets no image (tag v<version>).
	EtcdImageRepository string
	// MaxConcurrentReconciles is how many clusters are reconciled at once (1 when unset).
	MaxConcurrentReconciles int
	// Metrics exports what the reconciles see and do; nil exports nothing.
	Metrics *metrics.Recorder
	// Clock returns the time; nil means time.Now. Tests inject their own.
	Clock func() time.Time
	// MetricsURL says where a member Pod's etcd serves its metrics; nil means its Pod IP on
	// resources.MetricsPort. Tests point it at their own etcd.
	MetricsURL func(p *corev1.Pod) string
	// Image returns the Steward image: member Pods start etcd through its data check, a restored
	// seed runs its fetch. nil only in tests (etcd then starts directly, unchecked); an error holds
	// every Pod start (Facts.ImageHold).
	Image func(ctx context.Context) (string, error)
	// ToolsFromImage says whether the member Pod built now mounts the Steward image rather than
	// copying the member binary (resources.Member.ToolsFromImage); nil copies.
	ToolsFromImage func(ctx context.Context) bool

	// observer names this process for the quorum-loss clock (plan.Facts.Observer), made once.
	observerOnce sync.Once
	observerID   string

	// fresh keeps a reconcile from deciding on a cache older than the last status write.
	fresh freshness

	// certificatesApplied remembers, per cluster UID, when its cert-manager Certificates were
	// last applied (certificatesRecord); losing it on restart costs one re-apply.
	certificatesApplied sync.Map

	// authProbes remembers, per cluster UID, whether etcd had authentication on while spec.auth
	// was not declared (undeclaredAuthOn); losing it on restart costs one request per cluster.
	authProbes sync.Map

	// authPhases remembers each cluster's last known auth phase for its warning (authPhaseMemory).
	authPhases authPhaseMemory
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

// Reconcile takes one step towards the cluster's spec.
func (r *EtcdClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ec stewardv1.EtcdCluster
	if err := r.Client.Get(ctx, req.NamespacedName, &ec); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.fresh.stale(&ec, time.Now()) {
		return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	ctx = failpoint.WithArmed(ctx, ec.Annotations[stewardv1.AnnotationFailpoint])
	if ec.DeletionTimestamp != nil && !r.holdsTeardown(ctx, &ec) {
		r.Metrics.Forget(ec.Namespace, ec.Name)
		return ctrl.Result{}, r.teardown(ctx, &ec)
	}
	if err := r.ensureFinalizer(ctx, &ec); err != nil {
		return ctrl.Result{}, err
	}
	takenServices, err := r.ensureServices(ctx, &ec)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(takenServices) > 0 {
		r.event(&ec, corev1.EventTypeWarning, "ServiceNameTaken", "Service %s exists and is not this cluster's: Steward "+
			"leaves it alone, and its members are not reachable under that name; name the EtcdCluster differently",
			strings.Join(takenServices, ", "))
	}

	var tlsObs *tlsObserved
	if ec.TLSEnabled() {
		if tlsObs, err = r.prepareTLS(ctx, &ec); errors.Is(err, errRetry) {
			return ctrl.Result{RequeueAfter: whileWaiting}, nil // a CA Secret the cache has not shown yet
		} else if err != nil {
			return ctrl.Result{}, err
		}
	}
	o, err := r.gather(ctx, &ec)
	if err != nil {
		return ctrl.Result{}, err
	}
	o.tls = tlsObs
	if o.restore, err = r.resolveRestore(ctx, &ec); err != nil {
		return ctrl.Result{}, err
	}
	if o.restore != nil {
		o.facts.RestoreHold = o.restore.hold
	}
	o.facts.ImageHold = r.imageHold(ctx)
	if o.facts.DowngradeBackup, err = r.downgradeBackup(ctx, &ec); err != nil {
		return ctrl.Result{}, err
	}
	if o.facts.Adoption, err = r.adoptionFacts(ctx, &ec, o, takenServices); err != nil {
		return ctrl.Result{}, err
	}
	if tlsObs != nil {
		if err := r.reconcileTLS(ctx, &ec, o, tlsObs); errors.Is(err, errRetry) {
			return ctrl.Result{RequeueAfter: whileWaiting}, nil // a CA Secret the cache has not shown yet
		} else if err != nil {
			return ctrl.Result{}, err
		}
	}
	if o.crl, err = r.writeCRL(ctx, &ec, tlsObs); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.syncVoterLabels(ctx, &ec, o); err != nil {
		return ctrl.Result{}, err
	}
	o.auth = r.authFacts(ctx, &ec, o)
	o.facts.Auth = authplan.Decide(o.auth)
	d := plan.Plan(o.facts)
	a := d.Action
	logger := log.FromContext(ctx).WithValues("action", a.Kind, "member", a.Member, "reason", a.Reason)

	base := ec.DeepCopy()
	// After base: what it records in status.auth (certificates issued, serials revoked) is written
	// with this reconcile's status.
	if err := r.userCertificates(ctx, &ec, o, tlsObs); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.backupCertificate(ctx, &ec, tlsObs); err != nil {
		return ctrl.Result{}, err
	}
	applyErr := r.apply(ctx, &ec, o, a)
	if d.DropRecoverAnnotation != "" && applyErr == nil {
		applyErr = r.dropRecoverAnnotation(ctx, &ec, d.DropRecoverAnnotation)
	}
	r.setStatus(&ec, o, d)
	if err := r.setBackupStatus(ctx, &ec); err != nil {
		return ctrl.Result{}, errors.Join(applyErr, err)
	}
	if err := r.writeStatus(ctx, base, &ec, intentOnly(a)); err != nil {
		if apierrors.IsConflict(err) {
			// Decided from an object that has since changed: decide again from the newer one.
			logger.V(1).Info("status changed since it was read; planning again")
			return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
		}
		return ctrl.Result{}, errors.Join(applyErr, err)
	}
	r.warn(&ec, &base.Status)
	if err := r.syncMemberStatus(ctx, o, d); err != nil {
		return ctrl.Result{}, errors.Join(applyErr, err)
	}
	r.Metrics.Observe(ec.Namespace, ec.Name, &ec.Status)
	if a.Reason == plan.ReasonWaitingForHealth {
		r.Metrics.GateHeld(ec.Namespace, ec.Name, string(d.Gate.Check))
	}
	if applyErr == nil && a.Acts() {
		kind := ""
		if a.Disruption != nil {
			kind = string(a.Disruption.Kind)
		}
		r.Metrics.Action(ec.Namespace, ec.Name, string(a.Kind), kind, string(a.Reason))
	}
	switch {
	case errors.Is(applyErr, errRetry), errors.Is(applyErr, etcd.ErrClusterNotSettled),
		errors.Is(applyErr, disruption.ErrAlreadyTerminating): // the cache lags a deletion: plan again
		logger.V(1).Info("not yet", "message", a.Message)
		return ctrl.Result{RequeueAfter: whileWaiting}, nil
	case applyErr != nil:
		r.memberEvent(&ec, a.Member, corev1.EventTypeWarning, string(a.Kind)+"Failed", "%s: %v", a, applyErr)
		return ctrl.Result{}, applyErr
	case a.Kind == plan.Wait:
		logger.V(1).Info("waiting", "message", a.Message)
		return ctrl.Result{RequeueAfter: whileWaiting}, nil
	case a.Kind == plan.Nothing:
		// Settled: nothing talks to its etcd until the next check (30 s away), so its connections
		// are closed until then (etcd.Pool.Release) rather than held open for every cluster.
		r.Etcd.Release(string(ec.UID))
		return ctrl.Result{RequeueAfter: settledRequeue(o)}, nil
	}
	logger.Info("applied", "message", a.Message)
	if a.Kind != plan.RecordPhase {
		r.memberEvent(&ec, a.Member, corev1.EventTypeNormal, string(a.Kind), "%s", a.Message)
	}
	return ctrl.Result{RequeueAfter: afterAction}, nil
}

// intentOnly: the action's effect is a record in status the next stages run from (a quorum
// recovery's, a downgrade's, an adoption's start), so it is written only onto the object it was decided from (a
// reconcile that read a cache behind its own last write would otherwise start a recovery or a
// downgrade twice, or re-run a stage).
func intentOnly(a plan.Action) bool {
	switch a.Kind {
	case plan.Authenticate:
		// status.auth's records come before the step that creates what they name.
		return a.Auth != nil && (a.Auth.Kind == authplan.Record || a.Auth.Kind == authplan.RevokeCertificates)
	case plan.StartRecovery, plan.RecoveryStep, plan.FinishRecovery, plan.AbortRecovery, plan.Downgrade, plan.StartHandOver:
		return true
	}
	return false
}

// settledRequeue comes back for the next certificate renewal if it falls before the usual check.
// (The usual check, every 30 s, also notices a scheduled backup going stale.)
func settledRequeue(o *observed) time.Duration {
	if o.tls != nil && o.tls.user != nil {
		return userSecretPoll
	}
	if o.tls != nil && o.tls.decision.RequeueAfter > 0 && o.tls.decision.RequeueAfter < whenSettled {
		return o.tls.decision.RequeueAfter
	}
	return whenSettled
}

func (r *EtcdClusterReconciler) event(ec *stewardv1.EtcdCluster, kind, reason, format string, args ...any) {
	r.memberEvent(ec, "", kind, reason, format, args...)
}

// memberEvent records an event about one member. The member goes into the event's action: the
// events API merges events of the same cluster object version, type, reason and action into one
// series keeping the first message, which hid all but one of three members' "Defragmented" events
// recorded between two status writes.
func (r *EtcdClusterReconciler) memberEvent(ec *stewardv1.EtcdCluster, member, kind, reason, format string, args ...any) {
	if r.Recorder == nil {
		return
	}
	action := reason
	if member != "" {
		action = reason + " " + member
	}
	r.Recorder.Eventf(ec, nil, kind, reason, action, format, args...)
}

// SetupWithManager registers the reconciler and what it watches: the cluster, its members, and the
// members' Pods and PVCs (by label, since Pods are owned by members, not by the cluster).
func (r *EtcdClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	byCluster := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[stewardv1.LabelCluster]
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&stewardv1.EtcdCluster{}).
		Owns(&stewardv1.EtcdMember{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Watches(&corev1.Pod{}, byCluster).
		Watches(&corev1.PersistentVolumeClaim{}, byCluster).
		Watches(&corev1.Secret{}, byCluster).
		Watches(&stewardv1.EtcdBackup{}, handler.EnqueueRequestsFromMapFunc(byBackupCluster)).
		Watches(&stewardv1.EtcdBackupSchedule{}, handler.EnqueueRequestsFromMapFunc(byBackupCluster)).
		Named("etcdcluster").
		WithOptions(fairqueue.Options(r.MaxConcurrentReconciles)).
		Complete(r)
}
