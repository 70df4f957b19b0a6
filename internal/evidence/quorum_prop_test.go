package evidence

import (
	"fmt"
	"math/rand"
	"testing"
)

// randomVoter draws every combination of what a reconcile can see of one voter, including the
// contradictory ones (a member that answers with a leader while its kubelet reports it down: the
// reports come from different moments).
func randomVoter(r *rand.Rand, i int) Voter {
	v := Voter{Name: fmt.Sprintf("m-%d", i), Answered: r.Intn(2) == 0}
	if v.Answered {
		v.HasLeader, v.ReadOK = r.Intn(3) == 0, r.Intn(4) == 0
	} else {
		v.Err = "dial tcp: i/o timeout"
	}
	v.ContainerDown, v.NodeGone = r.Intn(4) == 0, r.Intn(6) == 0
	if r.Intn(5) == 0 {
		v.DataGone = "the data check found no WAL"
	}
	return v
}

// TestJudgeQuorumNeverOnSilence checks invariant 6's rules on random clusters of 1 to 7 voters,
// written from the rules themselves rather than from JudgeQuorum's code: quorum is Held whenever
// any voter answers with a leader or serves a read; it is Lost only when more than half of all
// voters show positive evidence; a voter that only failed to answer is never counted lost.
func TestJudgeQuorumNeverOnSilence(t *testing.T) {
	r := rand.New(rand.NewSource(23))
	for run := 0; run < 5000; run++ {
		n := 1 + r.Intn(7)
		var voters []Voter
		for i := 0; i < n; i++ {
			voters = append(voters, randomVoter(r, i))
		}
		q := JudgeQuorum(voters)
		proof, evidenced := false, 0
		for _, v := range voters {
			proof = proof || (v.Answered && (v.HasLeader || v.ReadOK))
			positive := v.DataGone != "" || v.NodeGone || v.ContainerDown || (v.Answered && !v.HasLeader && !v.ReadOK)
			if positive {
				evidenced++
			}
			_, lost := q.Lost[v.Name]
			if lost != positive {
				t.Fatalf("run %d: %+v counted lost=%v, want %v", run, v, lost, positive)
			}
			if _, unreachable := q.Unreachable[v.Name]; unreachable != (!v.Answered && !positive) {
				t.Fatalf("run %d: %+v counted unreachable=%v", run, v, unreachable)
			}
		}
		want := Unknown
		switch {
		case proof:
			want = Held
		case evidenced*2 > n:
			want = Lost
		}
		if q.State != want {
			t.Fatalf("run %d: %d voters %+v judged %s, want %s", run, n, voters, q.State, want)
		}
		if q.Voters != n {
			t.Fatalf("run %d: Voters = %d, want %d", run, q.Voters, n)
		}
	}
}

// TestVoterLostSaysTheStrongestEvidence: a voter with several kinds of evidence is named for the
// most durable one (data, node, container, then its own answer).
func TestVoterLostSaysTheStrongestEvidence(t *testing.T) {
	tests := []struct {
		v    Voter
		want string
	}{
		{Voter{DataGone: "PVC gone", NodeGone: true, ContainerDown: true, Answered: true}, "its data is gone (PVC gone)"},
		{Voter{NodeGone: true, ContainerDown: true}, "its node is gone or out of service"},
		{Voter{ContainerDown: true, Answered: true}, "the kubelet of its Ready node reports its etcd container not running"},
		{Voter{Answered: true}, "it answers without a leader and fails a linearizable read"},
		{Voter{Answered: true, HasLeader: true}, ""},
		{Voter{Answered: true, ReadOK: true}, ""},
		{Voter{Err: "timeout"}, ""},
	}
	for _, tt := range tests {
		if got := tt.v.lost(); got != tt.want {
			t.Errorf("%+v: lost() = %q, want %q", tt.v, got, tt.want)
		}
	}
}

func TestUnreachableNamesFollowTheOrder(t *testing.T) {
	q := JudgeQuorum([]Voter{silent("c"), serving("b"), silent("a")})
	got := q.UnreachableNames([]string{"a", "b", "c", "d"})
	if fmt.Sprint(got) != "[a c]" {
		t.Errorf("UnreachableNames = %v, want [a c]", got)
	}
	if got := byError(map[string]string{"a": "x", "c": "x"}, []string{"a", "c"}); got != "a, c (x)" {
		t.Errorf("one shared error: %q", got)
	}
	if got := byError(map[string]string{"a": "x", "c": "y"}, []string{"a", "c"}); got != "a, c (a: x; c: y)" {
		t.Errorf("errors of their own: %q", got)
	}
}
