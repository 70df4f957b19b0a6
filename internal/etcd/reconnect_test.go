package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/etcdtest"
)

// TestStatusReachesAMemberBackFromALongOutage: a member down for a while (a crash loop in its
// kubelet back-off) is seen the moment it answers again. gRPC alone would back its reconnects off
// to tens of seconds by then, and status would call the member down long after it came back
// (found by the issue 10 e2e: a member back after five minutes stayed "not ready" for a minute).
func TestStatusReachesAMemberBackFromALongOutage(t *testing.T) {
	backWithin(t, "status", func(ctx context.Context, c *Client, m *etcdtest.Member) error {
		return c.Status(ctx, m.ClientURL).Err
	})
}

// TestMemberListReachesAClusterBackFromALongOutage: the cluster-wide calls (member list, member
// add, remove, promote) go through one connection over the voters, or over an adopted source's
// client Service: the same growing backoff would keep them failing long after the cluster answers
// again (a source whose handshakes failed while the CA was not taken yet, a single-member cluster
// after a restart).
func TestMemberListReachesAClusterBackFromALongOutage(t *testing.T) {
	backWithin(t, "member list", func(ctx context.Context, c *Client, _ *etcdtest.Member) error {
		_, _, err := c.MemberList(ctx)
		return err
	})
}

// backWithin kills a one-member cluster, reads every two seconds for 20 s while the connection's
// backoff grows (as reconciles do), restarts it, and requires a read to succeed within 2.5 s of the
// member answering /health. Each read is bounded by what is left of them: a read blocks until the
// connection is back.
func backWithin(t *testing.T, what string, read func(context.Context, *Client, *etcdtest.Member) error) {
	cl := etcdtest.Start(t, 1)
	m := cl.Members[0]
	c, err := New(cl.ClientURLs(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := read(tctx(t), c, m); err != nil {
		t.Fatalf("%s before the outage: %v", what, err)
	}
	cl.Kill(m)
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Second) {
		if err := read(tctx(t), c, m); err == nil {
			t.Fatalf("%s of a killed member answered", what)
		}
	}
	cl.Restart(m)
	cl.WaitHealthy(m)
	back := time.Now()
	var last error
	for deadline := back.Add(2500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		last = read(ctx, c, m)
		cancel()
		if last == nil {
			t.Logf("%s read %s after the member answered", what, time.Since(back).Round(time.Millisecond))
			return
		}
	}
	t.Fatalf("the member answers /health, but its %s still fails: %v", what, last)
}
