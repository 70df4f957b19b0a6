package disruption

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	v1alpha1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// oracle is invariant 1 of the brief written out independently: may this request go ahead?
func oracle(c Cluster, r Request) bool {
	var v *Member
	voters, others := 0, 0
	for i := range c.Members {
		m := c.Members[i]
		if m.Name == r.Victim {
			v = &c.Members[i]
		}
		if m.Voter {
			voters++
		}
	}
	if v == nil {
		return false
	}
	mem := c.Medium == v1alpha1.StorageMediumMemory
	switch r.Kind {
	case DeleteData:
		return c.MemberListKnown && !v.Voter && !v.Learner
	case Dormant:
		if !c.Dormant || mem {
			return false
		}
		for _, m := range c.Members {
			if v.Leader && m.Name != v.Name && m.PodExists && !m.PodDeleting {
				return false
			}
		}
		return true
	}
	if !c.MemberListKnown {
		return false
	}
	if !v.Voter {
		return true // a learner, or not in etcd: no vote at stake
	}
	if voters == 1 {
		return r.Kind == Restart && !mem && c.AllowDowntime
	}
	if v.Leader || (mem && r.Kind == Restart) {
		return false
	}
	for _, m := range c.Members {
		if m.Name == v.Name {
			continue
		}
		if m.Learner {
			return false
		}
		if m.Voter {
			if !(m.Healthy && m.PodExists && m.PodReady && !m.PodDeleting && !m.InFlight) {
				return false
			}
			others++
		}
	}
	// With every other voter healthy, only the size matters: a restart or replacement needs a
	// majority of the full set without the victim; a removal a majority of the smaller set.
	if r.Kind == Remove {
		return others >= (voters-1)/2+1
	}
	return others >= voters/2+1
}

func randomCluster(r *rand.Rand) Cluster {
	n := 1 + r.Intn(6)
	c := Cluster{MemberListKnown: r.Intn(12) != 0, Dormant: r.Intn(8) == 0, AllowDowntime: r.Intn(2) == 0}
	if r.Intn(2) == 0 {
		c.Medium = v1alpha1.StorageMediumMemory
	}
	leader := r.Intn(n + 1) // n: no leader
	for i := 0; i < n; i++ {
		flaky := func() bool { return r.Intn(7) != 0 }
		m := Member{Name: fmt.Sprintf("c-%d", i), ID: uint64(i + 1), Voter: true, Leader: i == leader,
			Healthy: flaky(), PodExists: flaky(), PodReady: flaky(), PodDeleting: !flaky(), InFlight: !flaky()}
		switch r.Intn(10) {
		case 0:
			m.Voter, m.Learner, m.Leader = false, true, false
		case 1:
			m.Voter, m.ID, m.Leader = false, 0, false
		}
		c.Members = append(c.Members, m)
	}
	return c
}

// TestCheckAgainstOracle compares Check with the oracle on many random clusters and requests.
func TestCheckAgainstOracle(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	kinds := []Kind{Restart, Remove, Replace, DeleteData, Dormant}
	allowed := map[Kind]int{}
	refused := map[Kind]int{}
	for i := 0; i < 20000; i++ {
		c := randomCluster(r)
		req := Request{Kind: kinds[r.Intn(len(kinds))], Victim: fmt.Sprintf("c-%d", r.Intn(len(c.Members)+1))}
		err := Check(c, req)
		if (err == nil) != oracle(c, req) {
			t.Fatalf("cluster %+v\nrequest %+v: Check = %v, oracle allows=%v", c, req, err, oracle(c, req))
		}
		if err == nil {
			allowed[req.Kind]++
			continue
		}
		refused[req.Kind]++
		var ref *Refusal
		if !errors.As(err, &ref) || ref.Detail == "" {
			t.Fatalf("refusal without an explanation: %v", err)
		}
	}
	for _, k := range kinds {
		if allowed[k] < 100 || refused[k] < 100 {
			t.Errorf("%s: %d allowed, %d refused: the sample proves little", k, allowed[k], refused[k])
		}
	}
}

// TestDisrupterNeverActsOnRefusal: whatever the cluster, an effect runs only when Check allows.
func TestDisrupterNeverActsOnRefusal(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	for i := 0; i < 3000; i++ {
		c := randomCluster(r)
		req := Request{Kind: []Kind{Restart, Remove, Replace, DeleteData, Dormant}[r.Intn(5)],
			Victim: fmt.Sprintf("c-%d", r.Intn(len(c.Members)))}
		rec := &recorder{}
		err := New(rec).Do(context.Background(), c, req)
		if Check(c, req) != nil && len(rec.calls) > 0 {
			t.Fatalf("effects %v ran despite a refusal (%v)", rec.calls, err)
		}
		if err == nil && len(rec.calls) == 0 {
			v, _ := c.member(req.Victim)
			if !((req.Kind == Remove || req.Kind == Replace) && !v.Voter && !v.Learner) {
				t.Fatalf("allowed %+v on %+v but nothing ran", req, v)
			}
		}
	}
}

func TestReplace(t *testing.T) {
	mem := func(n int) Cluster { c := cluster(n); c.Medium = v1alpha1.StorageMediumMemory; return c }
	tests := []struct {
		name string
		c    Cluster
		want error
	}{
		{"memory follower of 3", mem(3), nil},
		{"memory follower of 2: cannot lose one", mem(2), ErrQuorum},
		{"pvc follower of 2", cluster(2), ErrQuorum},
		{"only memory member", mem(1), ErrMemoryData},
		{"only pvc member", cluster(1), ErrLastMember},
	}
	for _, tt := range tests {
		victim := "c-1"
		if len(tt.c.Members) == 1 {
			victim = "c-0"
		}
		err := Check(tt.c, Request{Replace, victim})
		if (tt.want == nil) != (err == nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
			t.Errorf("%s: Check = %v, want %v", tt.name, err, tt.want)
		}
	}
	rec := &recorder{}
	if err := New(rec).ReplaceMember(context.Background(), mem(3), "c-2"); err != nil || len(rec.calls) != 1 {
		t.Errorf("ReplaceMember: %v %v", err, rec.calls)
	}
}
