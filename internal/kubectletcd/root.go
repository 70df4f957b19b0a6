// Package kubectletcd is the `kubectl etcd` plugin: a human's view of Steward's EtcdClusters and
// the few actions a human takes on them. Everything it changes goes through the operator's own
// triggers (spec fields, annotations, EtcdBackup objects); the only things it does against etcd
// directly are a leadership handoff and running etcdctl, neither of which takes a member away.
package kubectletcd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// Env is what the commands need from the outside world. The real one talks to a cluster;
// tests hand in fake clients, a fixed clock and a fake port-forwarder.
type Env struct {
	Out, Err io.Writer
	In       io.Reader
	// Client reads and writes objects (Steward's kinds and core ones).
	Client client.Client
	// Clientset serves what the controller-runtime client cannot: Pod logs.
	Clientset kubernetes.Interface
	Namespace string
	Now       func() time.Time
	// Forward opens a tunnel to a Pod's port; nil uses `kubectl port-forward`.
	Forward Forwarder
	// KubectlArgs are the connection flags the user gave, passed on to kubectl subprocesses.
	KubectlArgs []string
}

// Scheme knows Steward's kinds and Kubernetes' built-in ones.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = stewardv1.AddToScheme(s)
	return s
}

// NewRootCommand builds `kubectl etcd`. env may be nil: the clients are then built from the
// kubeconfig flags when a command runs (so --help works without a cluster).
func NewRootCommand(env *Env) *cobra.Command {
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	overrides := &clientcmd.ConfigOverrides{}
	root := &cobra.Command{
		Use:           "kubectl-etcd",
		Short:         "Inspect and operate etcd clusters run by Steward",
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl etcd"},
	}
	flags := root.PersistentFlags()
	flags.StringVar(&loading.ExplicitPath, "kubeconfig", "", "path to the kubeconfig file")
	clientcmd.BindOverrideFlags(overrides, flags, clientcmd.RecommendedConfigOverrideFlags(""))

	// The environment is built lazily and once: subcommands call get() from RunE.
	var built *Env
	get := func(cmd *cobra.Command) (*Env, error) {
		if env != nil {
			if env.Namespace == "" {
				env.Namespace = "default"
			}
			if ns := overrides.Context.Namespace; ns != "" {
				env.Namespace = ns
			}
			return env, nil
		}
		if built != nil {
			return built, nil
		}
		e, err := buildEnv(cmd, loading, overrides)
		if err != nil {
			return nil, err
		}
		built = e
		return e, nil
	}
	root.AddCommand(
		newStatusCommand(get),
		newPauseCommand(get, true), newPauseCommand(get, false),
		newBackupCommand(get),
		newDefragCommand(get),
		newMoveLeaderCommand(get),
		newEtcdctlCommand(get),
		newReportCommand(get),
		newRestoreCommand(get),
		newRecoverQuorumCommand(get),
		newPlanCommand(get),
	)
	return root
}

type envFunc func(cmd *cobra.Command) (*Env, error)

func buildEnv(cmd *cobra.Command, loading *clientcmd.ClientConfigLoadingRules, overrides *clientcmd.ConfigOverrides) (*Env, error) {
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, overrides)
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	rc.UserAgent = "kubectl-etcd"
	c, err := client.New(rc, client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &Env{
		Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr(), In: os.Stdin,
		Client: c, Clientset: cs, Namespace: ns, Now: time.Now,
		KubectlArgs: connectionArgs(cmd.Root().PersistentFlags()),
	}, nil
}

// connectionArgs repeats the kubeconfig flags the user set, so a kubectl subprocess reaches the
// same cluster, context and user as this process.
func connectionArgs(fs *pflag.FlagSet) []string {
	var args []string
	fs.Visit(func(f *pflag.Flag) {
		if f.Name == "namespace" {
			return // every kubectl call here names its namespace itself
		}
		args = append(args, "--"+f.Name+"="+f.Value.String())
	})
	return args
}

// Main runs the plugin as a command and returns its exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := NewRootCommand(nil) //nolint:contextcheck // commands get ctx through ExecuteContext, not at construction
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	if ec := exitCode(0); errors.As(err, &ec) {
		return int(ec) // etcdctl's own status, its message already printed
	}
	_, _ = fmt.Fprintln(stderr, "error:", err)
	return 1
}

// exitCode passes a child process's exit status through without another message.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
