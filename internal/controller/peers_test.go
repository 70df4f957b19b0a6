package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/etcd"
	"github.com/etcd-steward/steward/internal/etcdtest"
)

func TestParseActivePeers(t *testing.T) {
	text := `# HELP etcd_network_active_peers The current number of active peer connections.
# TYPE etcd_network_active_peers gauge
etcd_network_active_peers{Local="a1",Remote="b2"} 1
etcd_network_active_peers{Local="a1",Remote="c3"} 0
etcd_network_active_peers{Local="ff",Remote="d4"} 1
etcd_network_active_peers_total 7
etcd_server_has_leader 1
`
	got, err := parseActivePeers(strings.NewReader(text), "A1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got["b2"] || got["c3"] {
		t.Errorf("got %v: want b2 active, c3 not, and another member's samples ignored", got)
	}
}

// The leader's own view of its peers, read from a real etcd: a member killed is seen inactive by
// the leader (whatever the operator can reach), a live one active.
func TestLeaderPeerViewFromRealEtcd(t *testing.T) {
	cl := etcdtest.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := etcd.New(cl.ClientURLs(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	ids := map[string]uint64{}
	var leader uint64
	for _, m := range cl.Members {
		s := c.Status(ctx, m.ClientURL)
		if s.Err != nil {
			t.Fatal(s.Err)
		}
		ids[m.Name], leader = s.MemberID, s.Leader
	}
	var lead, follower, other *etcdtest.Member
	for _, m := range cl.Members {
		switch {
		case ids[m.Name] == leader:
			lead = m
		case follower == nil:
			follower = m
		default:
			other = m
		}
	}
	view := func() map[string]bool {
		got, err := readActivePeers(ctx, lead.Metrics+"/metrics", etcd.IDString(leader))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	deadline := time.Now().Add(30 * time.Second)
	for !view()[etcd.IDString(ids[follower.Name])] {
		if time.Now().After(deadline) {
			t.Fatalf("the leader never shows %s active: %v", follower.Name, view())
		}
		time.Sleep(200 * time.Millisecond)
	}
	cl.Kill(follower)
	deadline = time.Now().Add(30 * time.Second)
	for {
		v := view()
		if !v[etcd.IDString(ids[follower.Name])] && v[etcd.IDString(ids[other.Name])] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after killing %s the leader's view is %v", follower.Name, v)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := readActivePeers(ctx, follower.Metrics+"/metrics", "x"); err == nil {
		t.Error("a dead member's metrics read without an error: no view must come of it")
	}
}
