package manager

import (
	"fmt"
	"sync"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/etcd-steward/steward/internal/backupjob"
	"github.com/etcd-steward/steward/internal/memberbinary"
	"github.com/etcd-steward/steward/internal/metrics"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/backupctl"
	"github.com/etcd-steward/steward/internal/controller"
	"github.com/etcd-steward/steward/internal/etcd"
)

// leaderElectionID names the Lease that operator replicas compete for.
const leaderElectionID = "steward.etcd.steward.dev"

// NewScheme returns a scheme with the built-in kinds and Steward's.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(stewardv1.AddToScheme(s))
	return s
}

// New builds a manager with every Steward controller registered and the health checks installed.
func New(cfg *rest.Config, o Options) (ctrl.Manager, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	cacheOpts, err := CacheOptions(o)
	if err != nil {
		return nil, err
	}
	rec, err := recorder()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(rec.API.Wrap)
	whs := webhookServer(o)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		WebhookServer:           whs,
		Scheme:                  NewScheme(),
		Cache:                   cacheOpts,
		Metrics:                 metricsOptions(o),
		HealthProbeBindAddress:  o.HealthProbeAddr,
		PprofBindAddress:        o.PprofAddr,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		// A replica that steps down exits at once, so two never act on the same member.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, err
	}
	image := &selfImage{flag: o.OperatorImage, reader: mgr.GetAPIReader()}
	disco, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("creating a discovery client: %w", err)
	}
	binaryVolume := &memberbinary.Chooser{Mode: o.MemberBinaryVolume, Nodes: mgr.GetAPIReader(), Server: disco}
	r := &controller.EtcdClusterReconciler{
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		Recorder:                mgr.GetEventRecorder("steward"),
		Etcd:                    etcd.NewPool(),
		EtcdImageRepository:     o.EtcdImageRepository,
		Image:                   image.get,
		ToolsFromImage:          binaryVolume.FromImage,
		MaxConcurrentReconciles: o.MaxConcurrentReconciles,
		Metrics:                 rec,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up EtcdCluster controller: %w", err)
	}
	br := &backupctl.BackupReconciler{
		Client:              mgr.GetClient(),
		APIReader:           mgr.GetAPIReader(),
		Recorder:            mgr.GetEventRecorder("steward"),
		Image:               image.get,
		EtcdImageRepository: o.EtcdImageRepository,
	}
	if err := br.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up EtcdBackup controller: %w", err)
	}
	sr := &backupctl.ScheduleReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("steward"), Image: image.get,
		EtcdImageRepository: o.EtcdImageRepository}
	if err := sr.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up EtcdBackupSchedule controller: %w", err)
	}
	if whs != nil {
		if err := setupWebhook(mgr, whs, o); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// recorder registers Steward's metrics once per process (the registry is global; tests start
// several managers).
var recorder = sync.OnceValues(func() (*metrics.Recorder, error) { return metrics.New(ctrlmetrics.Registry) })

// metricsOptions: HTTPS with Kubernetes authentication and authorization unless turned off. The
// serving certificate is self-signed (in memory), as kube-controller-manager's is by default:
// scrapers verify the caller side, the token, not the server.
func metricsOptions(o Options) metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.MetricsAddr}
	if o.MetricsSecure {
		m.SecureServing, m.FilterProvider = true, filters.WithAuthenticationAndAuthorization
	}
	return m
}

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// CacheOptions is what the operator's informer cache holds: the EtcdCluster controller's tests
// build their cache from it, so they see what the operator sees.
func CacheOptions(o Options) (cache.Options, error) {
	sync := o.SyncPeriod
	// Only Steward's own Pods, PVCs, Secrets, Services and PDBs are cached: an operator in a big
	// cluster must not hold every Pod or Service in memory. ensureServices reads the API server for
	// a Service or PDB of a cluster's name that the cache does not have (someone else's).
	owned, err := labels.Parse(stewardv1.LabelCluster)
	if err != nil {
		return cache.Options{}, err
	}
	backupJobs, err := labels.Parse(stewardv1.LabelBackup)
	if err != nil {
		return cache.Options{}, err
	}
	streamers, err := labels.Parse(backupjob.LabelStream)
	if err != nil {
		return cache.Options{}, err
	}
	// managedFields are stripped from every cached object: the operator reads none of them, and on
	// a Pod they outweigh the rest of its metadata.
	cacheOpts := cache.Options{SyncPeriod: &sync, DefaultTransform: cache.TransformStripManagedFields(), ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}:                   {Label: owned},
		&corev1.PersistentVolumeClaim{}: {Label: owned},
		&corev1.Secret{}:                {Label: owned},
		&corev1.Service{}:               {Label: owned},
		&policyv1.PodDisruptionBudget{}: {Label: owned},
		&batchv1.Job{}:                  {Label: backupJobs},
		&appsv1.Deployment{}:            {Label: streamers},
	}}
	if len(o.WatchNamespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.WatchNamespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return cacheOpts, nil
}
