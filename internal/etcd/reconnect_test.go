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
	cl := etcdtest.Start(t, 1)
	m := cl.Members[0]
	c, err := New(cl.ClientURLs(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if s := c.Status(tctx(t), m.ClientURL); s.Err != nil {
		t.Fatalf("status before the outage: %v", s.Err)
	}
	cl.Kill(m)
	// Reads every two seconds, as reconciles do, while the connection's backoff grows.
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Second) {
		if s := c.Status(tctx(t), m.ClientURL); s.Err == nil {
			t.Fatalf("status of a killed member answered")
		}
	}
	cl.Restart(m)
	cl.WaitHealthy(m)
	back := time.Now()
	var last error
	for range 4 { // within about two seconds of the member answering /health
		if last = c.Status(tctx(t), m.ClientURL).Err; last == nil {
			t.Logf("status answered %s after the member did", time.Since(back).Round(time.Millisecond))
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("the member answers /health, but its status read still fails: %v", last)
}

// TestMemberListReachesAClusterBackFromALongOutage: the cluster-wide calls (member list, member
// add, remove, promote) go through one connection over the voters, or over an adopted source's
// client Service: the same growing backoff would keep them failing long after the cluster answers
// again (a source whose handshakes failed while the CA was not taken yet, a single-member cluster
// after a restart).
func TestMemberListReachesAClusterBackFromALongOutage(t *testing.T) {
	cl := etcdtest.Start(t, 1)
	m := cl.Members[0]
	c, err := New(cl.ClientURLs(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, _, err := c.MemberList(tctx(t)); err != nil {
		t.Fatalf("member list before the outage: %v", err)
	}
	cl.Kill(m)
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Second) {
		if _, _, err := c.MemberList(tctx(t)); err == nil {
			t.Fatalf("the member list of a killed cluster was read")
		}
	}
	cl.Restart(m)
	cl.WaitHealthy(m)
	back := time.Now()
	// Within about two seconds of the member answering /health: each read is bounded by what is
	// left of them, since a read blocks until the connection is back.
	var last error
	for deadline := back.Add(2500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		_, _, last = c.MemberList(ctx)
		cancel()
		if last == nil {
			t.Logf("member list read %s after the member answered", time.Since(back).Round(time.Millisecond))
			return
		}
	}
	t.Fatalf("the member answers /health, but the member list still fails: %v", last)
}
