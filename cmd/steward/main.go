// Command steward is the Steward operator: it runs etcd clusters described by EtcdCluster objects.
// `steward snapshot save|fetch|verify|delete` is the data path of backups (internal/snapshot/cli),
// run in backup Jobs and restore init containers; `steward install-self <path>` copies the binary
// into a volume shared with another image's container; `steward stream` is a schedule's continuous
// backup (internal/streamer); `steward member run-etcd` checks a member's
// data directory (its owner, and its storage version against the etcd binary's) in its etcd
// container and then runs etcd (internal/datacheck).
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/KimMachineGun/automemlimit/memlimit"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/etcd-steward/steward/internal/datacheck"
	"github.com/etcd-steward/steward/internal/manager"
	"github.com/etcd-steward/steward/internal/selfinstall"
	"github.com/etcd-steward/steward/internal/snapshot/cli"
)

// defaultGCPercent is the operator's GOGC when the environment sets none.
const defaultGCPercent = 50

func main() {
	if len(os.Args) == 3 && os.Args[1] == "install-self" {
		if err := selfinstall.Install(os.Args[2]); err != nil {
			_, _ = os.Stderr.WriteString("steward install-self: " + err.Error() + "\n")
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 2 && os.Args[1] == "member" && os.Args[2] == "run-etcd" {
		// In the etcd container: check the data directory, then run etcd as its parent.
		os.Exit(datacheck.Main(os.Args[3:], os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "stream" {
		// The continuous backup (a Deployment of a schedule): SIGTERM uploads what it holds.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Stream(ctx, os.Args[2:], os.Getenv, os.Stderr)
		stop()
		os.Exit(code)
	}
	if len(os.Args) > 1 && os.Args[1] == "snapshot" {
		// SIGTERM (a deleted Job) cancels the upload, which aborts it: no half object remains.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Main(ctx, os.Args[2:], os.Getenv, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	var opts manager.Options
	opts.BindFlags(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")
	// The Go runtime knows no container limit: without GOMEMLIMIT the heap may grow to twice its
	// live size between collections, past the Pod's limit, and the operator is OOM-killed where a
	// collection would have done. 90 % of the cgroup's limit leaves room for what Go does not
	// count (the binary's pages, stacks); a GOMEMLIMIT set in the environment wins.
	if limit, err := memlimit.Set(memlimit.WithRatio(0.9), memlimit.WithProvider(memlimit.FromCgroup)); err != nil {
		log.Info("GOMEMLIMIT not set from the container's limit", "reason", err.Error())
	} else {
		log.Info("memory limit", "GOMEMLIMIT", limit)
	}

	// Between collections the heap grows by GOGC % of its live size in garbage. At Go's default of
	// 100 that was 6.4 MiB of a 45 MiB working set at 100 clusters, for no CPU the scale bench could
	// tell apart (issue 30, docs/measurements.md). A GOGC set in the environment wins.
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}

	mgr, err := manager.New(ctrl.GetConfigOrDie(), opts)
	if err != nil {
		log.Error(err, "cannot start")
		os.Exit(1)
	}
	log.Info("starting steward", "watchNamespaces", opts.WatchNamespaces, "etcdImageRepository", opts.EtcdImageRepository)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}
