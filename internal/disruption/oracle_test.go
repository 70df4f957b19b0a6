package disruption

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// oracle is invariant 1 (docs/design.md) written out from the invariant itself, not from Check's code:
// count the members that are unavailable before and after the request, and project quorum.
func oracle(c Cluster, r Request) bool {
	var v *Member
	for i := range c.Members {
		if c.Members[i].Name == r.Victim {
			v = &c.Members[i]
		}
	}
	if v == nil {
		return false
	}
	mem := c.Medium == stewardv1.StorageMediumMemory
	inEtcd := v.Voter || v.Learner
	switch r.Kind {
	case DeleteData: // data goes only once etcd provably no longer counts the member
		return c.MemberListKnown && !inEtcd
	case Dormant: // a chosen outage of PVC members, the leader's Pod last
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
	switch {
	case r.Kind == Restart && v.PodFailed && !mem: // nothing runs in a Failed Pod; its PVC stays
		return true
	case r.Kind == Restart && c.NeverFormed && !inEtcd: // a seed that never formed holds nothing
		return true
	case !c.MemberListKnown: // nothing can be proven
		return false
	case !v.Voter: // a learner, or out of etcd: no vote at stake
		return true
	case mem && r.Kind == Restart: // a memory voter's data goes with its Pod
		return false
	}
	serving := func(m Member) bool {
		return m.Voter && m.Healthy && m.PodExists && m.PodReady && !m.PodDeleting && !m.InFlight
	}
	voters, healthyOthers, otherDown := 0, 0, 0
	absentForReplacement := false
	for _, m := range c.Members {
		switch {
		case m.Voter:
			voters++
		case m.Learner:
			otherDown++ // a learner is a membership change under way
		case m.Replacing:
			absentForReplacement = true
		}
		if m.Name == v.Name || !m.Voter {
			continue
		}
		if serving(m) {
			healthyOthers++
		} else {
			otherDown++
		}
	}
	if voters == 1 { // the only voter: a restart is a full outage the user opted into
		return r.Kind == Restart && !mem && c.AllowDowntime
	}
	if v.Leader || otherDown > 0 { // invariant 2; and one disruption at a time
		return false
	}
	if absentForReplacement && serving(*v) { // a second member would be out; a down victim adds nothing
		return false
	}
	after := voters
	if r.Kind == Remove {
		after--
	}
	return healthyOthers >= after/2+1
}

func randomCluster(r *rand.Rand) Cluster {
	n := 1 + r.Intn(6)
	c := Cluster{MemberListKnown: r.Intn(12) != 0, Dormant: r.Intn(8) == 0, AllowDowntime: r.Intn(2) == 0}
	if r.Intn(2) == 0 {
		c.Medium = stewardv1.StorageMediumMemory
	}
	leader := r.Intn(n + 1) // n: no leader
	for i := 0; i < n; i++ {
		flaky := func() bool { return r.Intn(7) != 0 }
		m := Member{Name: fmt.Sprintf("c-%d", i), ID: uint64(i + 1), Voter: true, Leader: i == leader,
			Healthy: flaky(), PodExists: flaky(), PodReady: flaky(), PodDeleting: !flaky(), InFlight: !flaky(),
			PodFailed: r.Intn(12) == 0}
		switch r.Intn(10) {
		case 0:
			m.Voter, m.Learner, m.Leader = false, true, false
		case 1:
			m.Voter, m.ID, m.Leader = false, 0, false
			m.Replacing = r.Intn(2) == 0
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
	mem := func(n int) Cluster { c := cluster(n); c.Medium = stewardv1.StorageMediumMemory; return c }
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
