package kubectletcd

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
)

func newEtcdctlCommand(get envFunc) *cobra.Command {
	var member, binary string
	var all, noQuorumOK bool
	cmd := &cobra.Command{
		Use:   "etcdctl CLUSTER -- ARGS...",
		Short: "Run the etcdctl on PATH against the cluster, with its client certificate, through a port-forward",
		Long: `etcdctl port-forwards to a ready member's client port (--member to pick one, --all for every member
in status), writes the client Secret's certificate into a private temporary directory (removed
afterwards) and runs etcdctl with --endpoints, --cacert, --cert and --key before your arguments.
etcdctl's exit code is passed through. Members are reached through local ports, so etcdctl's
--cluster flag (which dials the members' in-cluster URLs) does not work: use --all.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := get(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			ec, err := getCluster(ctx, env, args[0])
			if err != nil {
				return err
			}
			if err := requireQuorum(ec); err != nil && !noQuorumOK {
				return fmt.Errorf("%w (--no-quorum-ok runs etcdctl anyway, for commands that need no quorum such as endpoint status)", err)
			}
			targets, err := etcdctlTargets(ec, member, all)
			if err != nil {
				return err
			}
			path, err := exec.LookPath(binary)
			if err != nil {
				return fmt.Errorf("etcdctl not found (--etcdctl or PATH): %w", err)
			}
			mat, err := loadClientMaterial(ctx, env, ec)
			if err != nil {
				return err
			}
			var endpoints []string
			for _, t := range targets {
				addr, stop, err := env.forwarder().Forward(ctx, env.Namespace, t, resources.ClientPort)
				if err != nil {
					return err
				}
				defer stop()
				endpoints = append(endpoints, mat.scheme+"://"+addr)
			}
			flags := []string{"--endpoints=" + strings.Join(endpoints, ",")}
			if !mat.tlsOff {
				dir, err := mat.writeFiles()
				if err != nil {
					return err
				}
				defer func() { _ = os.RemoveAll(dir) }()
				flags = append(flags, "--cacert="+filepath.Join(dir, "ca.crt"), "--cert="+filepath.Join(dir, "tls.crt"),
					"--key="+filepath.Join(dir, "tls.key"))
			}
			c := exec.CommandContext(ctx, path, append(flags, args[1:]...)...)
			c.Stdin, c.Stdout, c.Stderr = env.In, env.Out, env.Err
			err = c.Run()
			if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
				return exitCode(exit.ExitCode())
			}
			return err
		},
	}
	cmd.Flags().StringVar(&member, "member", "", "the member to reach (default: a ready voter, followers first)")
	cmd.Flags().BoolVar(&all, "all", false, "reach every member status lists, one endpoint each")
	cmd.Flags().StringVar(&binary, "etcdctl", "etcdctl", "the etcdctl binary")
	cmd.Flags().BoolVar(&noQuorumOK, "no-quorum-ok", false, "run even though status says the cluster lost quorum")
	return cmd
}

// etcdctlTargets picks members to forward to. A follower is preferred: a long etcdctl command
// (a snapshot, say) then does not load the leader.
func etcdctlTargets(ec *stewardv1.EtcdCluster, member string, all bool) ([]string, error) {
	var names, ready, leaders []string
	for _, m := range ec.Status.Members {
		names = append(names, m.Name)
		if m.Ready && m.Role == stewardv1.RoleFollower {
			ready = append(ready, m.Name)
		} else if m.Ready && m.Role == stewardv1.RoleLeader {
			leaders = append(leaders, m.Name)
		}
	}
	ready = append(ready, leaders...)
	switch {
	case all && len(names) > 0:
		return names, nil
	case member != "":
		for _, n := range names {
			if n == member {
				return []string{member}, nil
			}
		}
		return nil, fmt.Errorf("etcdcluster %q has no member %q (members: %s)", ec.Name, member, strings.Join(names, ", "))
	case len(ready) > 0:
		return ready[:1], nil
	}
	return nil, fmt.Errorf("etcdcluster %q has no ready member to reach", ec.Name)
}
