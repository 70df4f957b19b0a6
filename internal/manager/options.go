// Package manager builds the Steward controller manager from command-line options, so the binary
// and the tests start exactly the same thing.
package manager

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/etcd-steward/steward/internal/eviction"
	"github.com/etcd-steward/steward/internal/memberbinary"
)

// DefaultEtcdImageRepository is where etcd's own release images live; members run <repo>:v<version>.
const DefaultEtcdImageRepository = "gcr.io/etcd-development/etcd"

// Options are the manager's settings, one field per flag.
type Options struct {
	// WatchNamespaces limits the operator to these namespaces; empty watches all.
	WatchNamespaces []string
	// EtcdImageRepository is the repository of member images (tag v<version>).
	EtcdImageRepository string
	// LeaderElect makes only one replica of the operator active at a time.
	LeaderElect bool
	// LeaderElectionNamespace holds the election Lease; empty means the Pod's own namespace.
	LeaderElectionNamespace string
	// HealthProbeAddr serves /healthz and /readyz; "0" disables.
	HealthProbeAddr string
	// MetricsAddr serves Prometheus metrics; "0" disables.
	MetricsAddr string
	// MetricsSecure serves them over HTTPS to authenticated, authorized callers only (a token
	// allowed to get the /metrics non-resource URL).
	MetricsSecure bool
	// SyncPeriod is how often every object is reconciled even when nothing changed.
	SyncPeriod time.Duration
	// MaxConcurrentReconciles is how many EtcdClusters are reconciled at once. A reconcile of one
	// cluster never runs concurrently with another of the same cluster, whatever this says.
	MaxConcurrentReconciles int
	// OperatorImage is the image backup Jobs and restore init containers run; empty means the
	// operator's own Pod's image.
	OperatorImage string
	// PprofAddr serves Go's /debug/pprof profiles, unauthenticated; "" or "0" (the default) turns
	// them off. For measuring (make bench-scale takes a heap profile), never for production.
	PprofAddr string
	// EvictionWebhook serves the validating webhook on pods/eviction that makes a node drain's
	// eviction of a member a planned step (internal/eviction); false leaves evictions to the
	// PodDisruptionBudget alone.
	EvictionWebhook bool
	// EvictionBound is how long an eviction waits for its member to be prepared before the
	// webhook lets it through to the PodDisruptionBudget.
	EvictionBound time.Duration
	// WebhookPort and WebhookCertDir: where the webhook server listens, and the directory of its
	// serving certificate (tls.crt, tls.key).
	WebhookPort    int
	WebhookCertDir string
	// WebhookCertSecret names the Secret (in the operator's namespace) the certificate rotator keeps
	// the webhook's CA and serving certificate in, mounted at WebhookCertDir; "" when the
	// certificate is provided otherwise (cert-manager, tests). WebhookService is the webhook's
	// Service (the certificate's DNS name) and WebhookConfiguration the
	// ValidatingWebhookConfiguration whose caBundle the rotator fills.
	WebhookCertSecret    string
	WebhookService       string
	WebhookConfiguration string
	// MemberBinaryVolume is how member Pods get the member binary: "image" mounts the Steward
	// image as a volume (Kubernetes 1.35+, containerd 2.1+ or CRI-O 1.31+ on every node), "copy"
	// copies it with an init container, "auto" (the default) mounts it where the cluster can.
	MemberBinaryVolume string
}

// BindFlags registers the options on fs with their defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.Func("watch-namespaces", "comma-separated namespaces to watch (default: all)", func(v string) error {
		o.WatchNamespaces = splitList(v)
		return nil
	})
	fs.StringVar(&o.EtcdImageRepository, "etcd-image-repository", DefaultEtcdImageRepository,
		"image repository of etcd members; the tag is v<spec.version>")
	fs.BoolVar(&o.LeaderElect, "leader-elect", false, "elect a leader so only one operator replica acts")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "",
		"namespace of the leader election Lease (default: the operator's own)")
	fs.StringVar(&o.HealthProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8443", "address of the metrics endpoint; 0 disables")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", true,
		"serve metrics over HTTPS to callers whose token may get /metrics (TokenReview, SubjectAccessReview); false serves plain HTTP to anyone")
	fs.DurationVar(&o.SyncPeriod, "sync-period", 10*time.Minute, "full resync period")
	fs.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", 4,
		"EtcdClusters reconciled at once (each reconcile may wait on etcd for up to a few seconds)")
	fs.StringVar(&o.OperatorImage, "operator-image", "",
		"image of backup Jobs and restore init containers (default: the operator Pod's own image)")
	fs.BoolVar(&o.EvictionWebhook, "eviction-webhook", true,
		"serve the pods/eviction webhook that prepares a member (leadership moved, out of the client Service) before a drain evicts it")
	fs.DurationVar(&o.EvictionBound, "eviction-bound", eviction.DefaultBound,
		"how long an eviction waits for its member to be prepared before it is left to the PodDisruptionBudget")
	fs.IntVar(&o.WebhookPort, "webhook-port", 9443, "port of the webhook server")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs",
		"directory of the webhook's serving certificate (tls.crt, tls.key)")
	fs.StringVar(&o.WebhookCertSecret, "webhook-cert-secret", "steward-webhook-server-cert",
		"Secret in the operator's namespace where Steward keeps the webhook's CA and certificate (mounted at --webhook-cert-dir); empty: the certificate is provided otherwise")
	fs.StringVar(&o.WebhookService, "webhook-service", "steward-webhook-service", "the webhook's Service (its certificate's DNS name)")
	fs.StringVar(&o.WebhookConfiguration, "webhook-configuration", "steward-eviction",
		"the ValidatingWebhookConfiguration whose caBundle Steward fills")
	fs.StringVar(&o.MemberBinaryVolume, "member-binary-volume", memberbinary.Auto,
		"how member Pods get the member binary: image (an image volume of the Steward image), copy (an init container copies it), auto (image where the API server and every node's runtime can)")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", "",
		"address of Go's /debug/pprof profiles, unauthenticated (default: off); for measuring only")
}

// Validate reports options that cannot work, before anything starts.
func (o *Options) Validate() error {
	if strings.TrimSpace(o.EtcdImageRepository) == "" {
		return fmt.Errorf("--etcd-image-repository must not be empty")
	}
	if strings.Contains(o.EtcdImageRepository, "@") || strings.HasSuffix(o.EtcdImageRepository, ":") {
		return fmt.Errorf("--etcd-image-repository %q must be a repository without tag or digest", o.EtcdImageRepository)
	}
	if o.MaxConcurrentReconciles < 1 {
		return fmt.Errorf("--max-concurrent-reconciles %d must be at least 1", o.MaxConcurrentReconciles)
	}
	if o.EvictionWebhook && (o.EvictionBound <= 0 || o.EvictionBound >= eviction.RequestLifetime) {
		return fmt.Errorf("--eviction-bound %s must be above 0 and below %s", o.EvictionBound, eviction.RequestLifetime)
	}
	switch o.MemberBinaryVolume {
	case "", memberbinary.Auto, memberbinary.Image, memberbinary.Copy: // "": auto (an Options built in code)
	default:
		return fmt.Errorf("--member-binary-volume %q must be auto, image or copy", o.MemberBinaryVolume)
	}
	if o.SyncPeriod < time.Minute {
		return fmt.Errorf("--sync-period %s is below one minute", o.SyncPeriod)
	}
	return nil
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
