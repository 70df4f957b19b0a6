package manager

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/etcd-steward/steward/internal/eviction"
)

// The webhook's serving certificate: cert-controller's rotator (github.com/open-policy-agent/
// cert-controller, Gatekeeper's) generates a CA and a serving certificate into a Secret the install
// creates empty, renews them before they expire, and injects the CA into the webhook
// configuration's caBundle. The Secret is mounted into the operator's Pod (the rotator waits for
// the kubelet to project it); controller-runtime's webhook server reloads the files when they
// change. Well-kept code rather than crypto of our own, and no dependency on cert-manager.

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;list;watch;update;patch

// webhookServer is the server of the eviction webhook, with its handler registered; nil when the
// webhook is off.
func webhookServer(o Options) webhook.Server {
	if !o.EvictionWebhook {
		return nil
	}
	return webhook.NewServer(webhook.Options{Port: o.WebhookPort, CertDir: o.WebhookCertDir})
}

// setupWebhook registers the eviction handler and starts the server once its certificate is there:
// at once when the certificates come from elsewhere (--webhook-cert-secret=""), else when the
// rotator has written them, the kubelet projected them and the CA is in the configuration. Until
// then (and whenever Steward is down) the API server cannot call the webhook, and its
// failurePolicy Ignore leaves evictions to the PodDisruptionBudget.
func setupWebhook(mgr ctrl.Manager, srv webhook.Server, o Options) error {
	h := &eviction.Handler{Reader: mgr.GetClient(), Writer: mgr.GetClient(), Bound: o.EvictionBound}
	srv.Register(eviction.Path, &webhook.Admission{Handler: h})
	serving := &webhookServing{started: srv.StartedChecker()}
	if err := mgr.AddReadyzCheck("eviction-webhook", serving.check); err != nil {
		return err
	}
	if o.WebhookCertSecret == "" {
		mgr.GetWebhookServer() // adds the server to the manager
		return nil
	}
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		// Not in a Pod (make run, a test): no Service reaches it and no Secret is mounted.
		ctrl.Log.Info("eviction webhook not served: POD_NAMESPACE (the operator's namespace) is unset; evictions are left to the PodDisruptionBudget")
		serving.never.Store(true)
		return nil
	}
	ready := make(chan struct{})
	dns := fmt.Sprintf("%s.%s.svc", o.WebhookService, ns)
	if err := rotator.AddRotator(tolerant{mgr, serving}, &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: ns, Name: o.WebhookCertSecret},
		CertDir:        o.WebhookCertDir,
		CAName:         "steward-webhook-ca",
		CAOrganization: "steward",
		DNSName:        dns,
		ExtraDNSNames:  []string{dns + ".cluster.local"},
		IsReady:        ready,
		Webhooks:       []rotator.WebhookInfo{{Name: o.WebhookConfiguration, Type: rotator.Validating}},
	}); err != nil {
		return fmt.Errorf("setting up the webhook certificate rotator: %w", err)
	}
	return mgr.Add(everyReplica(func(ctx context.Context) error {
		select {
		case <-ready:
			mgr.GetWebhookServer() // added to a running manager, the server starts at once
		case <-ctx.Done():
		}
		return nil
	}))
}

// tolerant keeps a certificate rotator that gives up (the Secret or the configuration is missing,
// the kubelet never projects the Secret) from stopping the operator: the webhook is then not
// served, evictions go to the PodDisruptionBudget, and Steward goes on guarding its clusters.
type tolerant struct {
	ctrl.Manager
	serving *webhookServing
}

func (m tolerant) Add(r manager.Runnable) error {
	cr, ok := r.(*rotator.CertRotator)
	if !ok {
		return m.Manager.Add(r)
	}
	return m.Manager.Add(everyReplica(func(ctx context.Context) error {
		if err := cr.Start(ctx); err != nil {
			ctrl.Log.Error(err, "the eviction webhook has no certificate: evictions are left to the PodDisruptionBudget")
			m.serving.never.Store(true)
		}
		return nil
	}))
}

// everyReplica is a runnable that runs on every operator replica, leader or not (each serves the
// webhook behind its Service).
type everyReplica func(ctx context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (everyReplica) NeedLeaderElection() bool          { return false }

// webhookServing is the operator's readiness while it has an eviction webhook to serve: Ready once
// the server answers, so the Service the API server calls routes only to a replica that holds
// evictions. (Ready on a ping, a restarted operator joined the Service seconds before its server
// started, and a drain in that window went through without the leadership handover: CI.) A webhook
// that never will serve (not in a Pod, its certificate rotator gave up, both logged) does not hold
// readiness back: evictions then go to the PodDisruptionBudget alone.
type webhookServing struct {
	started healthz.Checker
	never   atomic.Bool
}

func (w *webhookServing) check(req *http.Request) error {
	if w.never.Load() {
		return nil
	}
	return w.started(req)
}
