// Package testenv starts the real kube-apiserver and etcd that the project builds from source
// (hack/toolchain.sh envtest), with Steward's CRDs installed, for integration tests.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/etcd-steward/steward/internal/manager"
)

// Env is a running control plane and a client for it.
type Env struct {
	Config *rest.Config
	Client client.Client
	// Webhook is where the API server calls the webhooks installed from config/webhook (with
	// WithWebhooks): a local host and port and the directory of a serving certificate it trusts.
	Webhook *envtest.WebhookInstallOptions
	env     *envtest.Environment
}

// Option configures Start.
type Option func(*envtest.Environment)

// WithWebhooks installs the webhook configurations of config/webhook, pointed at a local server
// (Env.Webhook says where); with failurePolicy Ignore they change nothing while none serves.
func WithWebhooks() Option {
	return func(e *envtest.Environment) {
		e.WebhookInstallOptions = envtest.WebhookInstallOptions{Paths: []string{filepath.Join(repoRoot(), "config", "webhook", "manifests.yaml")}}
	}
}

// repoRoot finds the repository from this file's location, so tests work from any package.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Start brings up the control plane. It fails, rather than skips, when the binaries are missing:
// a skipped integration test would make a broken toolchain look green.
func Start(opts ...Option) (*Env, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		assets := filepath.Join(repoRoot(), "_out", "envtest")
		if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
			return nil, fmt.Errorf("no control plane binaries: run `make test` (it builds them with hack/toolchain.sh envtest) or set KUBEBUILDER_ASSETS")
		}
		if err := os.Setenv("KUBEBUILDER_ASSETS", assets); err != nil {
			return nil, err
		}
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	for _, o := range opts {
		o(env)
	}
	cfg, err := env.Start()
	if err != nil {
		// Start can fail after the processes are up (a CRD the apiserver refuses): stop them, or
		// every failed run leaves an apiserver and an etcd behind.
		_ = env.Stop()
		return nil, fmt.Errorf("starting envtest: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: manager.NewScheme()})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	e := &Env{Config: cfg, Client: c, env: env}
	if len(env.WebhookInstallOptions.Paths) > 0 {
		e.Webhook = &env.WebhookInstallOptions
	}
	return e, nil
}

// Stop shuts the control plane down.
func (e *Env) Stop() error { return e.env.Stop() }
