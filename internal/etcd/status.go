package etcd

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-steward/steward/internal/failpoint"
)

// Status asks one endpoint about itself. A failure is recorded in the result, not returned, so a
// caller can gather every endpoint's view in one pass.
func (c *Client) Status(ctx context.Context, endpoint string) EndpointStatus {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	s := EndpointStatus{Endpoint: endpoint}
	one, err := c.endpoint(endpoint)
	if err != nil {
		s.Err = err
		return s
	}
	// Over the member's cached connection: clientv3's Maintenance.Status would dial anew each time.
	resp, err := etcdserverpb.NewMaintenanceClient(one.ActiveConnection()).Status(ctx, &etcdserverpb.StatusRequest{})
	if err != nil {
		s.Err = err
		return s
	}
	s.MemberID, s.ClusterID, s.Revision = resp.Header.MemberId, resp.Header.ClusterId, resp.Header.Revision
	s.Leader = resp.Leader
	s.RaftIndex = resp.RaftIndex
	s.AppliedIndex = resp.RaftAppliedIndex
	s.RaftTerm = resp.RaftTerm
	s.Version, s.StorageVersion = resp.Version, resp.StorageVersion
	s.IsLearner = resp.IsLearner
	if d := resp.DowngradeInfo; d != nil {
		s.DowngradeEnabled, s.DowngradeTarget = d.Enabled, d.TargetVersion
	}
	s.DBSize, s.DBSizeInUse, s.DBSizeQuota = resp.DbSize, resp.DbSizeInUse, resp.DbSizeQuota
	s.Errors, s.Alarms = splitErrors(resp.Errors)
	return s
}

// Statuses asks every given endpoint, concurrently.
func (c *Client) Statuses(ctx context.Context, endpoints []string) []EndpointStatus {
	out := make([]EndpointStatus, len(endpoints))
	done := make(chan struct{})
	for i, ep := range endpoints {
		go func() {
			out[i] = c.Status(ctx, ep)
			done <- struct{}{}
		}()
	}
	for range endpoints {
		<-done
	}
	return out
}

// LinearizableRead reads through one endpoint with a quorum read: it succeeds only when that
// member can reach the leader and has applied up to the read index, which is what "caught up and
// serving" means for the recovery gate.
func (c *Client) LinearizableRead(ctx context.Context, endpoint string) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	one, err := c.endpoint(endpoint)
	if err != nil {
		return err
	}
	if _, err := one.Get(ctx, "steward-health", clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("linearizable read through %s: %w", endpoint, err)
	}
	return nil
}

// MoveLeader hands leadership to target. It must be sent to the current leader, so the client is
// pointed at the leader's endpoint for the call.
func (c *Client) MoveLeader(ctx context.Context, leaderEndpoint string, target uint64) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	one, err := c.endpoint(leaderEndpoint)
	if err != nil {
		return err
	}
	failpoint.Hit(ctx, failpoint.BeforeMoveLeader)
	if _, err := one.MoveLeader(ctx, target); err != nil {
		return fmt.Errorf("moving leadership to %s: %w", IDString(target), err)
	}
	failpoint.Hit(ctx, failpoint.AfterMoveLeader)
	return nil
}

// DefragmentTimeout bounds one member's defragmentation: it rewrites the whole backend file, at
// tens of MiB/s on slow disks, and the member serves nothing meanwhile.
const DefragmentTimeout = 10 * time.Minute

// Defragment asks one member to defragment its backend, waiting until it is done.
func (c *Client) Defragment(ctx context.Context, endpoint string) error {
	ctx, cancel := context.WithTimeout(ctx, DefragmentTimeout)
	defer cancel()
	one, err := c.endpoint(endpoint)
	if err != nil {
		return err
	}
	failpoint.Hit(ctx, failpoint.BeforeDefragment)
	if _, err := one.Defragment(ctx, endpoint); err != nil {
		return fmt.Errorf("defragmenting %s: %w", endpoint, err)
	}
	failpoint.Hit(ctx, failpoint.AfterDefragment)
	return nil
}

// Alarm is one alarm active in the cluster: the member that raised it and its type (NOSPACE,
// CORRUPT). etcd replicates alarms through raft, so every member reports the same list.
type Alarm struct {
	MemberID uint64
	Type     string
}

// etcd's Status response lists the active alarms among its errors, as the text form of each
// AlarmMember. The text is read here rather than asking AlarmList: AlarmList is a raft proposal (a
// log entry on every call) and needs quorum, while every Status answer already carries the list.
// 3.7's protobuf runtime varies the spacing of that text on purpose, hence the \s*.
var alarmText = regexp.MustCompile(`memberID:\s*(\d+)\s+alarm:\s*([A-Z_]+)`)

// splitErrors separates the alarms from the other errors of a Status response. An error that names
// an alarm but does not parse stays an alarm (type as printed): it is still not a broken member.
func splitErrors(all []string) (errs []string, alarms []Alarm) {
	for _, e := range all {
		if m := alarmText.FindStringSubmatch(e); m != nil {
			id, _ := strconv.ParseUint(m[1], 10, 64)
			alarms = append(alarms, Alarm{MemberID: id, Type: m[2]})
			continue
		}
		if strings.Contains(e, "alarm:") {
			alarms = append(alarms, Alarm{Type: strings.TrimSpace(e)})
			continue
		}
		errs = append(errs, e)
	}
	return errs, alarms
}
