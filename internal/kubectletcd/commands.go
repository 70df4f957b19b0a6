package kubectletcd

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func newStatusCommand(get envFunc) *cobra.Command {
	var output string
	var live bool
	cmd := &cobra.Command{
		Use:   "status CLUSTER",
		Short: "Members, leader, sizes, alarms, certificates and the last backup, from the cluster's status",
		Long: `status reads the EtcdCluster, its EtcdMembers and EtcdBackups; it does not reach etcd, so it
also works on a cluster that lost quorum. --etcd adds what each member's etcd answers now (raft term
and index, revision), through a port-forward to each member.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := get(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			s, ec, err := loadStatus(ctx, env, args[0])
			if err != nil {
				return err
			}
			if live {
				s.Live = liveStatus(ctx, env, ec)
			}
			if output != "" {
				return printObject(env.Out, output, s)
			}
			return RenderStatus(env.Out, s, env.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml: the documented Status struct instead of text")
	cmd.Flags().BoolVar(&live, "etcd", false, "also ask each member's etcd for its raft term, index and revision")
	return cmd
}

func loadStatus(ctx context.Context, env *Env, name string) (Status, *stewardv1.EtcdCluster, error) {
	ec, err := getCluster(ctx, env, name)
	if err != nil {
		return Status{}, nil, err
	}
	members, err := listMembers(ctx, env, name)
	if err != nil {
		return Status{}, nil, err
	}
	backups, err := listBackups(ctx, env, name)
	if err != nil {
		return Status{}, nil, err
	}
	return BuildStatus(ec, members, backups), ec, nil
}

// newPauseCommand builds pause (paused=true) and resume (false). A merge patch touches only
// spec.paused, so it never races another writer's unrelated edit.
func newPauseCommand(get envFunc, pause bool) *cobra.Command {
	use, short := "resume CLUSTER", "Let rolls and scale steps run again (clears spec.paused)"
	if pause {
		use, short = "pause CLUSTER", "Stop every roll and scale step (sets spec.paused); status stays fresh"
	}
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := get(cmd)
			if err != nil {
				return err
			}
			ec, err := getCluster(cmd.Context(), env, args[0])
			if err != nil {
				return err
			}
			patch := `{"spec":{"paused":null}}`
			if pause {
				patch = `{"spec":{"paused":true}}`
			}
			if err := env.Client.Patch(cmd.Context(), ec, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				return apiError(err, "patch", "etcdclusters", env.Namespace, args[0])
			}
			if pause {
				_, err = fmt.Fprintf(env.Out, "etcdcluster %q paused: no roll or scale step starts; repairs of failed members go on\n", args[0])
			} else {
				_, err = fmt.Fprintf(env.Out, "etcdcluster %q resumed\n", args[0])
			}
			return err
		},
	}
}

// poll calls done every interval until it reports true, fails, or the timeout passes.
func poll(ctx context.Context, timeout, interval time.Duration, done func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := done(ctx)
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up after %s", timeout)
		case <-time.After(interval):
		}
	}
}
