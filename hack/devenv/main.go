// Command devenv runs Steward against a throwaway control plane (the envtest kube-apiserver and
// etcd built by hack/toolchain.sh): no kubelet, so no Pods run, but the API, admission rules and
// the operator's reconcile loop are real. It writes a kubeconfig and waits for Ctrl-C.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/etcd-steward/steward/internal/manager"
	"github.com/etcd-steward/steward/internal/testenv"
)

func main() {
	kubeconfig := flag.String("kubeconfig-out", "_out/envtest.kubeconfig", "where to write the admin kubeconfig")
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	if err := run(*kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "devenv:", err)
		os.Exit(1)
	}
}

func run(kubeconfigPath string) error {
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()

	cfg := env.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	if err := os.MkdirAll(filepath.Dir(kubeconfigPath), 0o755); err != nil {
		return err
	}
	if err := clientcmd.WriteToFile(*kc, kubeconfigPath); err != nil {
		return err
	}

	var o manager.Options
	o.BindFlags(flag.NewFlagSet("steward", flag.ContinueOnError)) // the binary's defaults
	o.HealthProbeAddr, o.MetricsAddr = "127.0.0.1:8081", "127.0.0.1:8080"
	o.EvictionWebhook = false // no nodes, nothing to evict, and no Service to reach the operator
	mgr, err := manager.New(cfg, o)
	if err != nil {
		return err
	}
	abs, _ := filepath.Abs(kubeconfigPath)
	fmt.Printf("\nSteward runs against a throwaway control plane. In another shell:\n"+
		"  export KUBECONFIG=%s\n  kubectl apply -k config/samples\n  kubectl get etcdclusters\n"+
		"Ctrl-C stops everything.\n\n", abs)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return mgr.Start(ctx)
}
