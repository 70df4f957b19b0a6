package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/etcd"
	"github.com/etcd-steward/steward/internal/etcdtest"
	"github.com/etcd-steward/steward/internal/health"
)

// The voters that answered Status are asked at the lowest revision any of them reported (every one
// has applied it); a learner is not asked, a silent voter is named without being asked.
func TestHashTargets(t *testing.T) {
	f := health.Facts{
		Members: []health.Member{{ID: 1, Name: "c-0"}, {ID: 2, Name: "c-1"}, {ID: 3, Name: "c-2"}, {ID: 4, Name: "c-3"},
			{ID: 9, Name: "c-9", IsLearner: true}},
		Endpoints: []health.Endpoint{
			{Member: "c-1", Reachable: true, MemberID: 2, Revision: 120},
			{Member: "c-0", Reachable: true, MemberID: 1, Revision: 125},
			{Member: "c-2", MemberID: 3},
			{Member: "c-3", Reachable: true, MemberID: 4, Revision: 118},
			{Member: "c-9", Reachable: true, MemberID: 9, Revision: 3},
		},
	}
	asked, silent, rev := hashTargets(f)
	var names []string
	for _, e := range asked {
		names = append(names, e.Member)
	}
	if !slices.Equal(names, []string{"c-0", "c-1", "c-3"}) || rev != 118 {
		t.Errorf("asked %v at %d, want [c-0 c-1 c-3] at 118", names, rev)
	}
	if len(silent) != 1 || silent[0].Name != "c-2" {
		t.Errorf("silent %+v, want c-2", silent)
	}
}

// Against a real cluster: no hash is read without CORRUPT, and under it every voter's hash is read
// at one revision and agrees, so the evidence is unanimous; a member down is named, not counted.
func TestCorruptionHashes(t *testing.T) {
	cl := etcdtest.Start(t, 3)
	c, err := etcd.New(cl.ClientURLs(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	endpoints := map[string]string{}
	for _, m := range cl.Members {
		endpoints[m.Name] = m.ClientURL
	}
	facts := func() health.Facts {
		var f health.Facts
		list, _, err := c.MemberList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range list {
			f.Members = append(f.Members, health.Member{ID: m.ID, Name: m.Name, IsLearner: m.IsLearner})
		}
		for _, m := range cl.Members {
			s := c.Status(ctx, m.ClientURL)
			f.Endpoints = append(f.Endpoints, health.Endpoint{Member: m.Name, Reachable: s.Err == nil, MemberID: s.MemberID, Revision: s.Revision})
			f.Alarms = addAlarms(f.Alarms, s.Alarms)
		}
		return f
	}
	if h := corruptionHashes(ctx, c, facts(), endpoints); h != nil {
		t.Errorf("hashes read without CORRUPT: %+v", h)
	}
	cl.RaiseAlarm(ctx, cl.Members[0], "CORRUPT")
	f := facts()
	f.Hashes = corruptionHashes(ctx, c, f, endpoints)
	if e := f.HashEvidence(); !e.Unanimous() || len(f.Hashes) != 3 {
		t.Errorf("equal data, evidence %+v: %s", e, f.HashSummary())
	}
	cl.Kill(cl.Members[2])
	f = facts()
	f.Hashes = corruptionHashes(ctx, c, f, endpoints)
	e := f.HashEvidence()
	if !e.Found() || e.Unanimous() || len(e.Minority) != 0 {
		t.Errorf("one member down, evidence %+v: %s", e, f.HashSummary())
	}
	want := fmt.Sprintf("%s: no hash (its endpoint did not answer Status)", cl.Members[2].Name)
	if !strings.Contains(f.HashSummary(), want) {
		t.Errorf("the member down is not named: %s (want %q)", f.HashSummary(), want)
	}
}
