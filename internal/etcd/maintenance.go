package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-steward/steward/internal/failpoint"
)

// Compact drops the history before rev and waits until every member applied it (physical), so
// the space it frees shows in the members' dbSizeInUse when it returns. A revision already
// compacted is not an error: the history is gone either way (a retry after a crash).
func (c *Client) Compact(ctx context.Context, rev int64) error {
	ctx, cancel := context.WithTimeout(ctx, DefragmentTimeout)
	defer cancel()
	failpoint.Hit(ctx, failpoint.BeforeCompact)
	_, err := c.cluster().Compact(ctx, rev, clientv3.WithCompactPhysical())
	if err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return fmt.Errorf("compacting to revision %d: %w", rev, err)
	}
	failpoint.Hit(ctx, failpoint.AfterCompact)
	return nil
}

// DisarmAlarm clears one alarm a member raised. It goes through raft, so it needs quorum.
func (c *Client) DisarmAlarm(ctx context.Context, memberID uint64, alarm string) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	t, ok := etcdserverpb.AlarmType_value[alarm]
	if !ok {
		return fmt.Errorf("unknown alarm type %q", alarm)
	}
	failpoint.Hit(ctx, failpoint.BeforeAlarmDisarm)
	_, err := c.cluster().AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: memberID, Alarm: etcdserverpb.AlarmType(t)})
	if err != nil {
		return fmt.Errorf("disarming %s of member %s: %w", alarm, IDString(memberID), err)
	}
	failpoint.Hit(ctx, failpoint.AfterAlarmDisarm)
	return nil
}
