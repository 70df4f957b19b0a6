package etcd

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/etcdtest"
)

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// startWithClient starts a real n-member cluster and a client of it, both closed with the test.
func startWithClient(t *testing.T, n int) (*etcdtest.Cluster, *Client) {
	t.Helper()
	cl := etcdtest.Start(t, n)
	c, err := New(cl.ClientURLs(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return cl, c
}

func leaderOf(t *testing.T, c *Client, endpoints []string) (leader uint64, endpoint string) {
	t.Helper()
	for _, s := range c.Statuses(tctx(t), endpoints) {
		if s.Err == nil && s.MemberID == s.Leader && s.Leader != 0 {
			return s.Leader, s.Endpoint
		}
	}
	t.Fatal("no leader found")
	return 0, ""
}

// One test walks a real cluster through every call the controllers make, in the order a scale-up,
// a leader hand-off and a scale-down use them.
func TestClientAgainstRealEtcd(t *testing.T) {
	cl, c := startWithClient(t, 3)
	ctx := tctx(t)

	members, clusterID, err := c.MemberList(ctx)
	if err != nil || len(members) != 3 || clusterID == 0 {
		t.Fatalf("member list = %v, cluster %x, %v", members, clusterID, err)
	}
	if m, ok := FindByPeerURL(members, cl.Members[1].PeerURL); !ok || m.Name != "m1" {
		t.Fatalf("FindByPeerURL(m1) = %+v, %v", m, ok)
	}
	if _, ok := FindByPeerURL(members, "http://nowhere:2380"); ok {
		t.Fatal("found a member that does not exist")
	}

	statuses := c.Statuses(ctx, cl.ClientURLs())
	for _, s := range statuses {
		if !s.Healthy() || s.AppliedIndex == 0 || s.Version == "" {
			t.Fatalf("unhealthy or empty status %+v", s)
		}
	}
	// etcd 3.6 reports its data's storage version once its version monitor has seen the cluster
	// version reach 3.6 (every few seconds): the planner's evidence of what the data accepts.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		s := c.Status(ctx, cl.ClientURLs()[0])
		if s.StorageVersion == "3.6.0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no storage version reported by etcd %s: %+v", s.Version, s)
		}
	}

	// Leadership moves to a follower on request.
	leader, leaderEP := leaderOf(t, c, cl.ClientURLs())
	var target uint64
	for _, s := range statuses {
		if s.MemberID != leader {
			target = s.MemberID
			break
		}
	}
	if err := c.MoveLeader(ctx, leaderEP, target); err != nil {
		t.Fatal(err)
	}
	if now, _ := leaderOf(t, c, cl.ClientURLs()); now != target {
		t.Fatalf("leader = %s after MoveLeader to %s", IDString(now), IDString(target))
	}

	// Scale up: add as learner, start the process, promote once caught up.
	joiner := cl.NewMember("m3")
	added, all, err := addLearner(t, c, joiner.PeerURL)
	if err != nil || !added.IsLearner || len(all) != 4 {
		t.Fatalf("AddLearner = %+v, %d members, %v", added, len(all), err)
	}
	var initial []string
	for _, m := range cl.Members {
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	cl.Join(joiner, strings.Join(initial, ","))
	cl.WaitHealthy(joiner)
	st := c.Status(ctx, joiner.ClientURL)
	if !st.IsLearner {
		t.Fatalf("joiner status says it is not a learner: %+v", st)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err = c.Promote(ctx, added.ID)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrLearnerNotReady) || time.Now().After(deadline) {
			t.Fatalf("promote: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	members, _, _ = c.MemberList(ctx)
	if m, _ := FindByPeerURL(members, joiner.PeerURL); m.IsLearner {
		t.Fatal("still a learner after promotion")
	}
	c.SetEndpoints(cl.ClientURLs())
	// The promoted member learns of its promotion when it applies the conf change, a moment after
	// the leader committed it; until then it refuses reads as a learner (seen under load).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err := c.LinearizableRead(ctx, joiner.ClientURL)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("read through the promoted member: %v", err)
		}
	}

	// Scale down: remove it; removing again is a no-op, so a retried step is safe.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		err := c.Remove(ctx, added.ID)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrClusterNotSettled) || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	if err := c.Remove(ctx, added.ID); err != nil {
		t.Fatalf("second remove: %v", err)
	}
	members, _, _ = c.MemberList(ctx)
	if len(members) != 3 {
		t.Fatalf("%d members after remove", len(members))
	}

	// A dead member fails the per-endpoint checks the gate relies on, without failing the rest.
	cl.Kill(cl.Members[0])
	dead := cl.Members[0].ClientURL
	if err := c.LinearizableRead(ctx, dead); err == nil {
		t.Fatal("linearizable read through a killed member succeeded")
	}
	var healthy int
	for _, s := range c.Statuses(ctx, []string{dead, cl.Members[1].ClientURL, cl.Members[2].ClientURL}) {
		if s.Healthy() {
			healthy++
		} else if s.Endpoint != dead {
			t.Errorf("live member %s reported unhealthy: %+v", s.Endpoint, s)
		}
	}
	if healthy != 2 {
		t.Fatalf("%d healthy endpoints, want 2", healthy)
	}
}

func TestPromoteNotReadyIsTyped(t *testing.T) {
	_, c := startWithClient(t, 1)
	// A learner that was added but never started cannot be in sync.
	added, _, err := addLearner(t, c, "http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Promote(tctx(t), added.ID); !errors.Is(err, ErrLearnerNotReady) {
		t.Fatalf("promote of an unstarted learner = %v, want ErrLearnerNotReady", err)
	}
	// etcd allows only one learner at a time by default; a second add must fail loudly.
	if _, _, err := c.AddLearner(tctx(t), "http://127.0.0.1:2"); err == nil {
		t.Fatal("a second learner was accepted")
	}
}

// addLearner retries while etcd says the cluster has not settled: a just-started cluster, or one
// whose leader just changed, refuses membership changes for a few seconds.
func addLearner(t *testing.T, c *Client, peerURL string) (Member, []Member, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		added, all, err := c.AddLearner(tctx(t), peerURL)
		if !errors.Is(err, ErrClusterNotSettled) || time.Now().After(deadline) {
			return added, all, err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestMemberConnectionsAreReused: per-member calls reuse one connection per endpoint across
// reconciles, and Retain drops the connections of endpoints that went.
func TestMemberConnectionsAreReused(t *testing.T) {
	cl, c := startWithClient(t, 1)
	ep := cl.Members[0].ClientURL
	for range 3 {
		if s := c.Status(tctx(t), ep); !s.Healthy() {
			t.Fatalf("status %+v", s)
		}
		if err := c.LinearizableRead(tctx(t), ep); err != nil {
			t.Fatal(err)
		}
	}
	first, _ := c.endpoint(ep)
	if again, _ := c.endpoint(ep); again != first || len(c.one) != 1 {
		t.Fatalf("%d member connections after repeated calls to one endpoint, want 1 reused", len(c.one))
	}
	if s := c.Status(tctx(t), "http://127.0.0.1:1"); s.Err == nil || s.Healthy() {
		t.Fatalf("status of a dead endpoint = %+v, want an error", s)
	}
	c.Retain([]string{ep})
	if len(c.one) != 1 {
		t.Fatalf("%d connections after Retain of one endpoint", len(c.one))
	}
	c.Retain(nil)
	if len(c.one) != 0 {
		t.Fatal("Retain(nil) kept connections")
	}
	if err := c.LinearizableRead(tctx(t), ep); err != nil {
		t.Fatalf("a dropped connection is not redialled: %v", err)
	}
}

func TestPool(t *testing.T) {
	p := NewPool()
	dials := 0
	p.dial = func(eps []string, creds *Credentials) (*Client, error) { dials++; return New(eps, creds) }
	a, err := p.Get("ns/a/uid1", []string{"http://127.0.0.1:1"}, false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := p.Get("ns/a/uid1", []string{"http://127.0.0.1:2", "http://127.0.0.1:1"}, false)
	if a != b || dials != 1 {
		t.Fatalf("second Get dialled again (%d dials)", dials)
	}
	if got := b.Endpoints(); !slices.Contains(got, "http://127.0.0.1:2") {
		t.Fatalf("endpoints not refreshed: %v", got)
	}
	if _, err := p.Get("ns/a/uid2", []string{"http://127.0.0.1:3"}, false); err != nil || p.Len() != 2 {
		t.Fatalf("a recreated cluster must get its own client: %d clients, %v", p.Len(), err)
	}
	p.Forget("ns/a/uid1")
	p.Forget("ns/a/uid1")
	if p.Len() != 1 {
		t.Fatalf("%d clients after Forget", p.Len())
	}
}

// A settled cluster's connections are closed between reconciles (Release): its client goes, its
// credentials stay (a CA rotation's bundle must survive), and the next Get dials anew.
func TestPoolRelease(t *testing.T) {
	p := NewPool()
	dials := 0
	p.dial = func(eps []string, creds *Credentials) (*Client, error) { dials++; return New(eps, creds) }
	creds := p.Credentials("uid1")
	a, err := p.Get("uid1", []string{"http://127.0.0.1:1"}, true)
	if err != nil {
		t.Fatal(err)
	}
	p.Release("uid1")
	p.Release("uid1")
	p.Release("never-dialled")
	if p.Len() != 0 {
		t.Fatalf("%d clients after Release", p.Len())
	}
	if err := a.c.Ctx().Err(); err == nil {
		t.Error("the released client is still open")
	}
	if p.Credentials("uid1") != creds {
		t.Error("Release dropped the cluster's credentials")
	}
	b, err := p.Get("uid1", []string{"http://127.0.0.1:1"}, true)
	if err != nil || b == a || dials != 2 {
		t.Fatalf("Get after Release: %v, same client %v, %d dials", err, b == a, dials)
	}
	p.Forget("uid1")
}
