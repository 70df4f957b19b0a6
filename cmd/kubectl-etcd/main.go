// Command kubectl-etcd is the `kubectl etcd` plugin for clusters run by Steward; the commands live
// in internal/kubectletcd (docs/kubectl-plugin.md).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/etcd-steward/steward/internal/kubectletcd"
)

func main() {
	// Ctrl-C cancels the command's context, so port-forwards and temporary files are cleaned up.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := kubectletcd.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
