// Command cert-manager-controller runs the part of cert-manager's controller that Steward's
// tests need (Certificates issued by SelfSigned and CA Issuers/ClusterIssuers), built from
// github.com/cert-manager/cert-manager on the Go module proxy.
//
// Why it exists: upstream's real main and its `app` package live in the nested module
// github.com/cert-manager/cert-manager/cmd/controller, which is not published on the proxy,
// while the controllers themselves (pkg/controller/...) are, in the root module. So this file
// wires them the way cmd/controller/app does: one controller.ContextFactory, every
// controller constructed from it (each registers its informers), then the shared informer
// factories started and every controller run until SIGINT/SIGTERM.
//
// Deliberately left out: leader election (one replica, out of cluster), the webhook and the
// cainjector (separate binaries upstream), ACME, Vault and Venafi (heavy imports, unused),
// the CertificateSigningRequest, ingress/gateway-shim and metrics controllers, and the
// metrics/healthz servers. hack/toolchain.sh certmanager builds it; certmanager_test.go shows
// it issuing certificates against an envtest kube-apiserver.
//
//	cert-manager-controller --kubeconfig FILE [--namespace NS] [--cluster-resource-namespace NS] [-v 2]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	crapprover "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"         // registers the CA issuer type
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned" // registers the SelfSigned issuer type
	logf "github.com/cert-manager/cert-manager/pkg/logs"
)

// controllers are the controllers this binary runs. Importing a controller package registers
// it in controller.Known(); only these are imported, and this list is what actually runs.
var controllers = []string{
	issuers.ControllerName,
	clusterissuers.ControllerName, // skipped with --namespace, as upstream does
	crapprover.ControllerName,     // approves every CertificateRequest (no policy engine)
	crselfsigned.CRControllerName,
	crca.CRControllerName,
	trigger.ControllerName,
	keymanager.ControllerName,
	requestmanager.ControllerName,
	issuing.ControllerName,
	readiness.ControllerName,
	revisionmanager.ControllerName,
}

func main() {
	var opts controller.ContextOptions
	var workers int
	klog.InitFlags(nil) // -v, -logtostderr, ...
	flag.StringVar(&opts.Kubeconfig, "kubeconfig", "", "kubeconfig file (empty: in-cluster config)")
	flag.StringVar(&opts.APIServerHost, "master", "", "overrides the kubeconfig's API server address")
	flag.StringVar(&opts.Namespace, "namespace", "", "watch only this namespace (empty: all; disables ClusterIssuers)")
	flag.StringVar(&opts.ClusterResourceNamespace, "cluster-resource-namespace", "kube-system",
		"namespace of the Secrets that ClusterIssuers refer to")
	flag.IntVar(&workers, "workers", 5, "workers per controller")
	flag.Parse()

	// Upstream defaults (internal/apis/config/controller/v1alpha1/defaults.go, which this
	// module cannot import).
	opts.KubernetesAPIQPS, opts.KubernetesAPIBurst = 20, 50
	opts.ClusterIssuerAmbientCredentials = true
	opts.CertificateRequestMinimumBackoffDuration = time.Hour
	opts.CertificateRequestMaximumBackoffDuration = 32 * time.Hour

	logf.InitLogs()
	defer logf.FlushLogs()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	if err := run(ctx, opts, workers); err != nil {
		logf.Log.Error(err, "cert-manager controller failed")
		logf.FlushLogs()
		os.Exit(1)
	}
}

func run(ctx context.Context, opts controller.ContextOptions, workers int) error {
	log := logf.FromContext(ctx)
	factory, err := controller.NewContextFactory(ctx, opts)
	if err != nil {
		return err
	}
	// The base context: every controller's context shares its informer factories.
	base, err := factory.Build()
	if err != nil {
		return err
	}

	g, ctx := errgroup.WithContext(ctx)
	known := controller.Known()
	for _, name := range controllers {
		if name == clusterissuers.ControllerName && opts.Namespace != "" {
			log.Info("not starting controller: scoped to one namespace", "controller", name)
			continue
		}
		construct, ok := known[name]
		if !ok {
			return fmt.Errorf("controller %q is not registered", name)
		}
		c, err := construct(factory) // registers the controller's informers and event handlers
		if err != nil {
			return fmt.Errorf("constructing controller %q: %w", name, err)
		}
		log.Info("starting controller", "controller", name)
		g.Go(func() error { return c.Run(workers, ctx) })
	}

	// Informers are only created by the constructors above, so start the factories last.
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done()) // nothing uses it here; harmless

	err = g.Wait()
	base.KubeSharedInformerFactory.Shutdown()
	base.SharedInformerFactory.Shutdown()
	base.HTTP01ResourceMetadataInformersFactory.Shutdown()
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	log.Info("control loops exited")
	return nil
}
