package evidence

import (
	"slices"
	"strings"
	"testing"
)

func answersLeaderless(name string) Voter { return Voter{Name: name, Answered: true} }
func silent(name string) Voter            { return Voter{Name: name, Err: "context deadline exceeded"} }
func serving(name string) Voter {
	return Voter{Name: name, Answered: true, HasLeader: true, ReadOK: true}
}

func TestJudgeQuorum(t *testing.T) {
	tests := []struct {
		name        string
		voters      []Voter
		want        State
		lost        []string
		unreachable []string
	}{
		{name: "every member serves", voters: []Voter{serving("a"), serving("b"), serving("c")}, want: Held},
		// The operator on the minority side: the one member it reaches has no leader, the two it
		// cannot reach hold quorum between them and serve clients.
		{name: "the operator reaches one leaderless member of three", voters: []Voter{answersLeaderless("a"), silent("b"), silent("c")},
			want: Unknown, lost: []string{"a"}, unreachable: []string{"b", "c"}},
		{name: "the operator reaches no member", voters: []Voter{silent("a"), silent("b"), silent("c")},
			want: Unknown, unreachable: []string{"a", "b", "c"}},
		{name: "one member answering with a leader proves quorum", voters: []Voter{
			{Name: "a", Answered: true, HasLeader: true}, silent("b"), silent("c")}, want: Held, unreachable: []string{"b", "c"}},
		{name: "a linearizable read proves quorum", voters: []Voter{
			{Name: "a", Answered: true, ReadOK: true}, answersLeaderless("b"), answersLeaderless("c")}, want: Held, lost: []string{"b", "c"}},
		{name: "proof outweighs any loss", voters: []Voter{
			{Name: "a", Answered: true, HasLeader: true}, {Name: "b", DataGone: "PVC gone"}, {Name: "c", DataGone: "PVC gone"}}, want: Held, lost: []string{"b", "c"}},
		{name: "two of three answer leaderless", voters: []Voter{answersLeaderless("a"), answersLeaderless("b"), silent("c")},
			want: Lost, lost: []string{"a", "b"}, unreachable: []string{"c"}},
		{name: "one leaderless, two with their data gone", voters: []Voter{answersLeaderless("a"),
			{Name: "b", DataGone: "PVC gone"}, {Name: "c", DataGone: "empty data directory"}}, want: Lost, lost: []string{"a", "b", "c"}},
		{name: "silent members whose kubelet reports etcd down are lost", voters: []Voter{
			{Name: "a", ContainerDown: true, Err: "connection refused"}, {Name: "b", ContainerDown: true}, silent("c")},
			want: Lost, lost: []string{"a", "b"}, unreachable: []string{"c"}},
		{name: "a deleted or out-of-service node counts", voters: []Voter{
			{Name: "a", NodeGone: true}, {Name: "b", NodeGone: true}, silent("c")}, want: Lost, lost: []string{"a", "b"}, unreachable: []string{"c"}},
		// The rule asks more than half: two lost of four already leave no quorum of three
		// possible, but a recovery destroys data, so it waits for one more voter's evidence.
		{name: "half of four is not a strict majority", voters: []Voter{answersLeaderless("a"), answersLeaderless("b"), silent("c"), silent("d")},
			want: Unknown, lost: []string{"a", "b"}, unreachable: []string{"c", "d"}},
		{name: "three of five", voters: []Voter{answersLeaderless("a"), {Name: "b", DataGone: "PVC gone"}, {Name: "c", NodeGone: true},
			silent("d"), silent("e")}, want: Lost, lost: []string{"a", "b", "c"}, unreachable: []string{"d", "e"}},
		{name: "two of five", voters: []Voter{answersLeaderless("a"), {Name: "b", DataGone: "PVC gone"}, silent("c"), silent("d"), silent("e")},
			want: Unknown, lost: []string{"a", "b"}, unreachable: []string{"c", "d", "e"}},
		{name: "a single voter that answers leaderless", voters: []Voter{answersLeaderless("a")}, want: Lost, lost: []string{"a"}},
		{name: "a single silent voter", voters: []Voter{silent("a")}, want: Unknown, unreachable: []string{"a"}},
		{name: "no voters prove nothing", want: Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := JudgeQuorum(tt.voters)
			if q.State != tt.want {
				t.Fatalf("state %s, want %s (%+v)", q.State, tt.want, q)
			}
			if got := keys(q.Lost); !slices.Equal(got, tt.lost) {
				t.Errorf("lost %v, want %v", got, tt.lost)
			}
			if got := keys(q.Unreachable); !slices.Equal(got, tt.unreachable) {
				t.Errorf("unreachable %v, want %v", got, tt.unreachable)
			}
			if tt.want == Held && q.Proof == "" {
				t.Error("Held without a proof")
			}
		})
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestQuorumSummary(t *testing.T) {
	order := []string{"a", "b", "c"}
	q := JudgeQuorum([]Voter{answersLeaderless("a"), silent("b"), silent("c")})
	s := q.Summary(order)
	for _, w := range []string{"quorum unknown: 1 of 3", "a: it answers without a leader", "cannot reach b, c (context deadline exceeded)"} {
		if !strings.Contains(s, w) {
			t.Errorf("summary %q lacks %q", s, w)
		}
	}
	if got := q.UnreachableNames(order); !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("unreachable names %v", got)
	}
	q = JudgeQuorum([]Voter{answersLeaderless("a"), {Name: "b", DataGone: "PVC gone"}, silent("c")})
	if s := q.Summary(order); !strings.HasPrefix(s, "quorum lost: 2 of 3") || !strings.Contains(s, "b: its data is gone (PVC gone)") {
		t.Errorf("lost summary %q", s)
	}
	q = JudgeQuorum([]Voter{serving("a")})
	if s := q.Summary(order); s != "etcd shows quorum: a serves a linearizable read" {
		t.Errorf("held summary %q", s)
	}
	q = JudgeQuorum([]Voter{{Name: "a", Answered: true, HasLeader: true}, silent("b"), {Name: "c", Err: "connection refused"}})
	if s := q.Summary(order); s != "etcd shows quorum: a answers with a leader; the operator cannot reach b, c (b: context deadline exceeded; c: connection refused)" {
		t.Errorf("held summary with unreachable members %q", s)
	}
}
