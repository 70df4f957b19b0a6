// Package framework is the toolkit of Steward's end-to-end tests: clients for the
// cluster under test, a namespace per test, apply/patch helpers, waits that dump
// diagnostics on failure, direct etcd clients to member Pods, a client traffic
// generator with a lost-write check, and a disruption monitor.
//
// The pure parts (history analysis, percentiles, the monitor's accounting) have
// ordinary unit tests; everything that talks to a cluster is exercised by the tests
// in the parent package (build tag e2e).
package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// Config is what hack/e2e.sh tells the tests about the environment (STEWARD_E2E_*).
type Config struct {
	Kubeconfig          string
	EtcdVersions        []string // built etcd versions with images, e.g. v3.5.35 v3.6.16 v3.7.3
	EtcdImageRepository string
	OperatorNamespace   string
	OperatorDeployment  string
	Artifacts           string // directory for failure dumps
	// KubeAPIServer is the kube-apiserver binary the project builds for envtest: scenarios run
	// one as an etcd client on the host.
	KubeAPIServer string
}

// ConfigFromEnv reads the environment, with defaults matching the local cluster.
func ConfigFromEnv() Config {
	return Config{
		Kubeconfig:          os.Getenv("KUBECONFIG"),
		EtcdVersions:        strings.Fields(os.Getenv("STEWARD_E2E_ETCD_VERSIONS")),
		EtcdImageRepository: envOr("STEWARD_E2E_ETCD_IMAGE_REPOSITORY", "gcr.io/etcd-development/etcd"),
		OperatorNamespace:   envOr("STEWARD_E2E_OPERATOR_NAMESPACE", "steward-system"),
		OperatorDeployment:  envOr("STEWARD_E2E_OPERATOR_DEPLOYMENT", "steward-controller-manager"),
		Artifacts:           envOr("STEWARD_E2E_ARTIFACTS", filepath.Join(os.TempDir(), "steward-e2e")),
		KubeAPIServer:       envOr("STEWARD_E2E_KUBE_APISERVER", "../../_out/envtest/kube-apiserver"),
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// EtcdImage is the image of an etcd version ("v3.6.16" or "3.6.16").
func (c Config) EtcdImage(version string) string {
	return c.EtcdImageRepository + ":v" + strings.TrimPrefix(version, "v")
}

// DefaultEtcdVersion is the 3.6 version when built (the middle of the supported
// range), else the newest one listed.
func (c Config) DefaultEtcdVersion() string {
	for _, v := range c.EtcdVersions {
		if strings.HasPrefix(v, "v3.6.") {
			return v
		}
	}
	if len(c.EtcdVersions) == 0 {
		return ""
	}
	return c.EtcdVersions[len(c.EtcdVersions)-1]
}

// Framework holds the clients of one test binary; create it once in TestMain.
type Framework struct {
	Config
	REST      *rest.Config
	Scheme    *runtime.Scheme
	Client    client.Client        // typed and unstructured objects, server-side apply
	Watcher   client.WithWatch     // Client, which also watches
	Clientset kubernetes.Interface // logs and other subresources
}

// New connects to the cluster named by cfg.Kubeconfig.
func New(cfg Config) (*Framework, error) {
	if cfg.Kubeconfig == "" {
		return nil, fmt.Errorf("KUBECONFIG is not set (run the tests with make e2e)")
	}
	if len(cfg.EtcdVersions) == 0 {
		return nil, fmt.Errorf("STEWARD_E2E_ETCD_VERSIONS is not set (run the tests with make e2e)")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return nil, err
	}
	// Tests poll a lot (the disruption monitor lists Pods every 100 ms); the default
	// client-side limit of 5 QPS would turn into multi-second waits.
	rc.QPS, rc.Burst = 200, 400
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := stewardv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(rc, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &Framework{Config: cfg, REST: rc, Scheme: scheme, Client: c, Watcher: c, Clientset: cs}, nil
}
