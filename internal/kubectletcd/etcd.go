package kubectletcd

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
)

// memberConn is an etcd client to one member through a port-forward.
type memberConn struct {
	member string
	addr   string
	*clientv3.Client
	stop func()
}

func (c *memberConn) Close() {
	_ = c.Client.Close()
	c.stop()
}

// dialMember forwards to member's client port and connects with the client certificate.
func dialMember(ctx context.Context, env *Env, ec *stewardv1.EtcdCluster, mat *clientMaterial, member string) (*memberConn, error) {
	addr, stop, err := env.forwarder().Forward(ctx, env.Namespace, member, resources.ClientPort)
	if err != nil {
		return nil, err
	}
	tc, err := mat.tlsConfig(ec, member)
	if err != nil {
		stop()
		return nil, err
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{mat.scheme + "://" + addr}, TLS: tc, DialTimeout: 10 * time.Second,
		Context: ctx, Logger: zap.NewNop()})
	if err != nil {
		stop()
		return nil, fmt.Errorf("connecting to %s through %s: %w", member, addr, err)
	}
	return &memberConn{member: member, addr: addr, Client: c, stop: stop}, nil
}

func newMoveLeaderCommand(get envFunc) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "move-leader CLUSTER [MEMBER]",
		Short: "Hand raft leadership to MEMBER (default: the first ready follower)",
		Long: `move-leader asks the current leader's etcd to transfer leadership (etcd's MoveLeader), through a
port-forward with the cluster's client certificate. Leadership moves without any member stopping;
the operator has no trigger of its own for it.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := get(cmd)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			ec, err := getCluster(ctx, env, args[0])
			if err != nil {
				return err
			}
			if err := requireQuorum(ec); err != nil {
				return err
			}
			target := ""
			if len(args) == 2 {
				target = args[1]
			}
			return moveLeader(ctx, env, ec, target)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "give up after this long")
	return cmd
}

func moveLeader(ctx context.Context, env *Env, ec *stewardv1.EtcdCluster, target string) error {
	leader := ""
	for _, m := range ec.Status.Members {
		if m.Role == stewardv1.RoleLeader {
			leader = m.Name
		}
	}
	if leader == "" {
		return fmt.Errorf("etcdcluster %q: status names no leader", ec.Name)
	}
	mat, err := loadClientMaterial(ctx, env, ec)
	if err != nil {
		return err
	}
	// Status may be a few seconds old: ask the member, and follow etcd's answer once.
	var conn *memberConn
	var st *clientv3.StatusResponse
	for range 2 {
		if conn, err = dialMember(ctx, env, ec, mat, leader); err != nil {
			return err
		}
		if st, err = conn.Status(ctx, conn.Endpoints()[0]); err != nil {
			conn.Close()
			return fmt.Errorf("status of %s: %w", leader, err)
		}
		if st.Leader == st.Header.MemberId {
			break
		}
		actual, err := memberName(ctx, conn, st.Leader)
		conn.Close()
		conn = nil
		if err != nil {
			return err
		}
		leader = actual
	}
	if conn == nil {
		return fmt.Errorf("leadership is moving right now; try again")
	}
	defer conn.Close()
	list, err := conn.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("member list: %w", err)
	}
	var targetID uint64
	for _, m := range list.Members {
		if m.IsLearner || m.ID == st.Header.MemberId {
			continue
		}
		if (target == "" && readyInStatus(ec, m.Name)) || m.Name == target {
			targetID = m.ID
			target = m.Name
			break
		}
	}
	switch {
	case target == leader:
		_, err := fmt.Fprintf(env.Out, "%s already leads\n", leader)
		return err
	case targetID == 0 && target != "":
		return fmt.Errorf("%s is not a voting member of etcdcluster %q (learners cannot lead)", target, ec.Name)
	case targetID == 0:
		return fmt.Errorf("etcdcluster %q has no ready follower to take over", ec.Name)
	}
	if _, err := conn.MoveLeader(ctx, targetID); err != nil {
		return fmt.Errorf("move leader %s -> %s: %w", leader, target, err)
	}
	after, err := conn.Status(ctx, conn.Endpoints()[0])
	if err != nil {
		return fmt.Errorf("leadership moved, but %s no longer answers: %w", leader, err)
	}
	_, err = fmt.Fprintf(env.Out, "leadership moved from %s to %s (raft term %d)\n", leader, target, after.RaftTerm)
	return err
}

func memberName(ctx context.Context, c *memberConn, id uint64) (string, error) {
	list, err := c.MemberList(ctx)
	if err != nil {
		return "", fmt.Errorf("member list: %w", err)
	}
	for _, m := range list.Members {
		if m.ID == id {
			return m.Name, nil
		}
	}
	return "", fmt.Errorf("member %s is not in the member list", strconv.FormatUint(id, 16))
}

func readyInStatus(ec *stewardv1.EtcdCluster, name string) bool {
	for _, m := range ec.Status.Members {
		if m.Name == name {
			return m.Ready && m.Role == stewardv1.RoleFollower
		}
	}
	return false
}

// liveStatus asks every member in status for its own view; a member that does not answer gets
// its error on its row instead of failing the screen.
func liveStatus(ctx context.Context, env *Env, ec *stewardv1.EtcdCluster) []LiveMember {
	mat, err := loadClientMaterial(ctx, env, ec)
	var out []LiveMember
	for _, m := range ec.Status.Members {
		lm := LiveMember{Name: m.Name}
		if err != nil {
			lm.Error = err.Error()
			out = append(out, lm)
			continue
		}
		func() {
			cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			conn, err := dialMember(cctx, env, ec, mat, m.Name)
			if err != nil {
				lm.Error = err.Error()
				return
			}
			defer conn.Close()
			st, err := conn.Status(cctx, conn.Endpoints()[0])
			if err != nil {
				lm.Error = err.Error()
				return
			}
			lm.Term, lm.Index, lm.Applied, lm.Revision = st.RaftTerm, st.RaftIndex, st.RaftAppliedIndex, st.Header.Revision
			lm.DBSize, lm.InUse, lm.IsLearner = st.DbSize, st.DbSizeInUse, st.IsLearner
			lm.Leader = strconv.FormatUint(st.Leader, 16)
			for _, x := range ec.Status.Members {
				if x.ID == lm.Leader {
					lm.Leader = x.Name
				}
			}
		}()
		out = append(out, lm)
	}
	return out
}
