package health

import (
	"fmt"
	"math/rand"
	"testing"
)

// scenario is a random cluster state described by plain flags, from which both the facts and the
// expected verdict are derived independently of Gate's code.
type scenario struct {
	n         int
	listErr   bool
	learner   bool
	missing   int // index of an expected voter absent from the list, or -1
	extra     bool
	noLeader  bool
	unreach   int // index of a voter whose endpoint does not answer, or -1
	unhealthy int
	alarm     int // index of a voter reporting an error
	raised    bool
	behind    int
	readFail  int
	skip      int // index of the skipped victim, or -1
	behindBy  uint64
	tolerance uint64
	leaderIdx int
}

func randomScenario(r *rand.Rand) scenario {
	n := 1 + r.Intn(5)
	pick := func() int {
		if r.Intn(4) == 0 {
			return r.Intn(n)
		}
		return -1
	}
	s := scenario{
		n: n, listErr: r.Intn(10) == 0, learner: r.Intn(8) == 0, missing: pick(), extra: r.Intn(8) == 0,
		noLeader: r.Intn(10) == 0, unreach: pick(), unhealthy: pick(), alarm: pick(), behind: pick(),
		readFail: pick(), skip: pick(), raised: r.Intn(8) == 0, behindBy: uint64(r.Intn(300)), leaderIdx: r.Intn(n),
	}
	if r.Intn(2) == 0 {
		s.tolerance = uint64(1 + r.Intn(200))
	}
	return s
}

func (s scenario) build() (Facts, Expectation) {
	var f Facts
	e := Expectation{Tolerance: s.tolerance}
	if s.listErr {
		f.MemberListErr = "timeout"
	}
	leaderID := uint64(s.leaderIdx + 1)
	if s.noLeader {
		leaderID = 0
	}
	for i := 0; i < s.n; i++ {
		name := fmt.Sprintf("m-%d", i)
		url := "http://" + name + ":2380"
		e.Voters = append(e.Voters, Voter{Name: name, PeerURL: url})
		if i != s.missing {
			f.Members = append(f.Members, Member{ID: uint64(i + 1), Name: name, PeerURLs: []string{url}})
		}
		ep := Endpoint{Member: name, Reachable: i != s.unreach, Healthy: i != s.unhealthy, MemberID: uint64(i + 1),
			LeaderID: leaderID, AppliedIndex: 10000, ReadOK: i != s.readFail}
		if i == s.alarm {
			ep.Errors = []string{"etcdserver: no leader"}
		}
		if i == s.behind && i != s.leaderIdx {
			ep.AppliedIndex -= s.behindBy
		}
		f.Endpoints = append(f.Endpoints, ep)
	}
	if s.learner {
		f.Members = append(f.Members, Member{ID: 99, PeerURLs: []string{"http://new:2380"}, IsLearner: true})
	}
	if s.extra {
		f.Members = append(f.Members, Member{ID: 98, Name: "stray", PeerURLs: []string{"http://stray:2380"}})
	}
	if s.raised {
		f.Alarms = []Alarm{{MemberID: uint64(s.n), Type: "NOSPACE"}}
	}
	if s.skip >= 0 {
		e.Skip = []string{fmt.Sprintf("m-%d", s.skip)}
	}
	return f, e
}

// oracle is the gate's rule written out directly from invariant 4 (docs/design.md).
func (s scenario) oracle() bool {
	tol := s.tolerance
	if tol == 0 {
		tol = DefaultAppliedIndexTolerance
	}
	judged := func(i int) bool { return i != s.skip }
	switch {
	case s.listErr, s.learner, s.extra, s.missing >= 0, s.noLeader, s.raised:
		return false
	case s.unreach == s.leaderIdx: // the leader must answer, skipped or not
		return false
	}
	for i := 0; i < s.n; i++ {
		if !judged(i) {
			continue
		}
		behind := i == s.behind && i != s.leaderIdx && s.behindBy > tol
		if i == s.unreach || i == s.unhealthy || i == s.alarm || behind || i == s.readFail {
			return false
		}
	}
	return true
}

// TestGateAgainstOracle compares Gate with the oracle on thousands of random clusters.
func TestGateAgainstOracle(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	passes, fails := 0, 0
	for i := 0; i < 5000; i++ {
		s := randomScenario(r)
		f, e := s.build()
		got := Gate(f, e)
		if got.Passed() != s.oracle() {
			t.Fatalf("scenario %+v: Gate = %v, oracle says pass=%v", s, got, s.oracle())
		}
		if got.Passed() {
			passes++
		} else {
			fails++
			if got.Reason == "" || got.Check == "" {
				t.Fatalf("a failure without a check or reason: %+v", got)
			}
		}
	}
	// Both outcomes must be well represented, or the comparison proves little.
	if passes < 300 || fails < 300 {
		t.Errorf("unbalanced sample: %d passes, %d failures", passes, fails)
	}
}

// TestGateIsDeterministic: the same facts in a different order give the same first failure.
func TestGateIsDeterministic(t *testing.T) {
	f, voters := healthy(5)
	f.Endpoints[1].Healthy = false
	f.Endpoints[3].Healthy = false
	want := Gate(f, Expectation{Voters: voters})
	for i, j := 0, len(f.Endpoints)-1; i < j; i, j = i+1, j-1 {
		f.Endpoints[i], f.Endpoints[j] = f.Endpoints[j], f.Endpoints[i]
		voters[i], voters[j] = voters[j], voters[i]
	}
	if got := Gate(f, Expectation{Voters: voters}); got != want {
		t.Errorf("order changed the verdict: %v vs %v", got, want)
	}
}

func TestFactsAccessors(t *testing.T) {
	f, _ := healthy(2)
	if !f.MemberListKnown() {
		t.Errorf("a read list is known")
	}
	if _, ok := f.Endpoint("c-1"); !ok {
		t.Errorf("endpoint c-1 not found")
	}
	if _, ok := f.Endpoint("nope"); ok {
		t.Errorf("found an endpoint that does not exist")
	}
	f.MemberListErr = "x"
	if f.MemberListKnown() {
		t.Errorf("an error means unknown")
	}
	for in, want := range map[string]string{
		"http://a:2380": "a:2380", "https://a:2380/": "a:2380", "a:2380": "a:2380", "": "",
	} {
		if got := normalizeURL(in); got != want {
			t.Errorf("normalizeURL(%q) = %q, want %q", in, got, want)
		}
	}
}
