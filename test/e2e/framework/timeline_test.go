package framework

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestEvaluate(t *testing.T) {
	expected := []string{"e-0", "e-1", "e-2"}
	voters := []MemberObservation{{Name: "e-0"}, {Name: "e-1"}, {Name: "e-2"}}
	ready := []PodObservation{{"e-0", true}, {"e-1", true}, {"e-2", true}}
	cases := []struct {
		name    string
		pods    []PodObservation
		members []MemberObservation
		listErr error
		want    map[string][]string // unavailable member -> reasons
	}{
		{"steady", ready, voters, nil, map[string][]string{}},
		{"pod deleted", ready[:2], voters, nil, map[string][]string{"e-2": {ReasonPodMissing}}},
		{"pod not ready", []PodObservation{{"e-0", true}, {"e-1", false}, {"e-2", true}}, voters, nil,
			map[string][]string{"e-1": {ReasonNotReady}}},
		{"learner", ready, []MemberObservation{{Name: "e-0"}, {Name: "e-1"}, {Name: "e-2", Learner: true}}, nil,
			map[string][]string{"e-2": {ReasonNotVoter}}},
		{"removed from membership", ready, voters[:2], nil, map[string][]string{"e-2": {ReasonNotVoter}}},
		{"added, not started", ready, []MemberObservation{{Name: "e-0"}, {Name: "e-1"}, {Name: ""}}, nil,
			map[string][]string{"e-2": {ReasonNotVoter}}},
		{"pod gone and removed", ready[:2], voters[:2], nil,
			map[string][]string{"e-2": {ReasonPodMissing, ReasonNotVoter}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := Evaluate(t0, expected, c.pods, c.members, c.listErr)
			got := map[string][]string{}
			for _, m := range s.Members {
				if len(m.Reasons) > 0 {
					got[m.Name] = m.Reasons
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("unavailable = %v, want %v", got, c.want)
			}
			if s.Unavailable != len(c.want) {
				t.Fatalf("count = %d, want %d", s.Unavailable, len(c.want))
			}
			if (c.listErr != nil) != (s.ListErr != "") {
				t.Fatalf("ListErr = %q", s.ListErr)
			}
		})
	}
}

// A member list that fails proves only that quorum is gone: at least a majority's complement is
// unavailable, not every member (two of three down, one Ready, is two unavailable).
func TestEvaluateWithoutMemberList(t *testing.T) {
	expected := []string{"e-0", "e-1", "e-2"}
	noLeader := errors.New("context deadline exceeded")
	cases := []struct {
		name     string
		expected []string
		pods     []PodObservation
		want     int
	}{
		{"all Ready", expected, []PodObservation{{"e-0", true}, {"e-1", true}, {"e-2", true}}, 2},
		{"two down, one Ready", expected, []PodObservation{{"e-0", true}, {"e-2", false}}, 2},
		{"three down", expected, []PodObservation{{"e-0", false}}, 3},
		{"single member", expected[:1], []PodObservation{{"e-0", true}}, 1},
		{"five members", []string{"a", "b", "c", "d", "e"}, nil, 5},
		{"five members, Ready", []string{"a", "b", "c", "d", "e"},
			[]PodObservation{{"a", true}, {"b", true}, {"c", true}, {"d", true}, {"e", true}}, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := Evaluate(t0, c.expected, c.pods, nil, noLeader)
			if s.Unavailable != c.want {
				t.Fatalf("count = %d, want %d (%+v)", s.Unavailable, c.want, s.Members)
			}
			if !strings.Contains(s.String(), "member list: context deadline exceeded") {
				t.Fatalf("the failed list is not shown: %q", s.String())
			}
		})
	}
}

func TestEvaluateIgnoresUnexpectedPods(t *testing.T) {
	// A Pod of a member being added (not yet expected) must not count, either way.
	s := Evaluate(t0, []string{"e-0"}, []PodObservation{{"e-0", true}, {"e-1", false}},
		[]MemberObservation{{Name: "e-0"}, {Name: "e-1", Learner: true}}, nil)
	if s.Unavailable != 0 || len(s.Members) != 1 {
		t.Fatalf("sample = %+v", s)
	}
}

func sample(ms, unavailable int) Sample {
	s := Sample{At: at(ms), Unavailable: unavailable}
	for i := 0; i < unavailable; i++ {
		s.Members = append(s.Members, MemberState{Name: "m", Reasons: []string{ReasonPodMissing}})
	}
	return s
}

func TestTimelineAccounting(t *testing.T) {
	tl := Timeline{sample(0, 0), sample(100, 0), sample(200, 1), sample(300, 1), sample(400, 2), sample(500, 0), sample(600, 0)}
	if tl.Max() != 2 {
		t.Fatalf("max = %d", tl.Max())
	}
	if s, ok := tl.FirstReaching(1); !ok || !s.At.Equal(at(200)) {
		t.Fatalf("first reaching 1 = %v %v", s.At, ok)
	}
	if _, ok := tl.FirstReaching(3); ok {
		t.Fatal("never reached 3")
	}
	if d := tl.Duration(1); d != 300*time.Millisecond {
		t.Fatalf("duration >=1 = %v, want 300ms (200..500)", d)
	}
	if d := tl.Duration(2); d != 100*time.Millisecond {
		t.Fatalf("duration >=2 = %v", d)
	}
	ch := tl.Changes()
	var got []int
	for _, s := range ch {
		got = append(got, s.Unavailable)
	}
	if !reflect.DeepEqual(got, []int{0, 1, 2, 0}) {
		t.Fatalf("changes = %v", got)
	}
	if str := tl.String(); strings.Count(str, "\n") != 4 || !strings.Contains(str, "unavailable=2 [m: pod missing; m: pod missing]") {
		t.Fatalf("rendered:\n%s", str)
	}
	if (Timeline{}).Max() != 0 {
		t.Fatal("empty timeline max")
	}
}

// An instant whose Pod list failed counts nobody unavailable but stays visible in the changes, so
// a slow API server neither fails nor hides anything.
func TestUnknownSample(t *testing.T) {
	s := UnknownSample(t0, errors.New("context deadline exceeded"))
	tl := Timeline{Evaluate(t0, []string{"e-0"}, []PodObservation{{"e-0", true}}, []MemberObservation{{Name: "e-0"}}, nil), s}
	if tl.Max() != 0 {
		t.Errorf("Max = %d with an unknown instant", tl.Max())
	}
	if got := tl.Changes(); len(got) != 2 || !strings.Contains(got[1].String(), "unknown (pod list: context deadline exceeded)") {
		t.Errorf("changes %v", got)
	}
}
