package health

import (
	"fmt"
	"strings"
	"testing"
)

// healthy returns the facts of an n-member cluster where everything is fine; member i has ID i+1,
// the first member leads at applied index 1000.
func healthy(n int) (Facts, []Voter) {
	var f Facts
	var voters []Voter
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("c-%d", i)
		url := fmt.Sprintf("http://%s.c.ns.svc:2380", name)
		voters = append(voters, Voter{Name: name, PeerURL: url})
		f.Members = append(f.Members, Member{ID: uint64(i + 1), Name: name, PeerURLs: []string{url}})
		f.Endpoints = append(f.Endpoints, Endpoint{
			Member: name, Reachable: true, Healthy: true, MemberID: uint64(i + 1), LeaderID: 1,
			AppliedIndex: 1000, Version: "3.6.5", ReadOK: true,
		})
	}
	return f, voters
}

func TestGate(t *testing.T) {
	tests := []struct {
		name   string
		n      int
		mutate func(f *Facts, e *Expectation)
		want   Check
		member string
		reason string // a substring the human reason must contain
	}{
		{name: "healthy 1", n: 1},
		{name: "healthy 3", n: 3},
		{name: "healthy 5", n: 5},
		{
			name: "member list unreadable", n: 3, want: CheckMemberList, reason: "context deadline",
			mutate: func(f *Facts, _ *Expectation) { f.MemberListErr = "context deadline exceeded" },
		},
		{
			name: "learner listed", n: 3, want: CheckNoLearner, reason: "learner 4",
			mutate: func(f *Facts, _ *Expectation) {
				f.Members = append(f.Members, Member{ID: 4, PeerURLs: []string{"http://c-3.c.ns.svc:2380"}, IsLearner: true})
			},
		},
		{
			name: "expected voter missing", n: 3, want: CheckVoters, member: "c-2", reason: "not in the member list",
			mutate: func(f *Facts, _ *Expectation) { f.Members = f.Members[:2] },
		},
		{
			name: "unexpected extra voter", n: 3, want: CheckVoters, reason: "unexpected member 9",
			mutate: func(f *Facts, _ *Expectation) {
				f.Members = append(f.Members, Member{ID: 9, Name: "stray", PeerURLs: []string{"http://stray:2380"}})
			},
		},
		{
			name: "no leader known", n: 3, want: CheckLeader,
			mutate: func(f *Facts, _ *Expectation) {
				for i := range f.Endpoints {
					f.Endpoints[i].LeaderID = 0
				}
			},
		},
		{
			name: "leader not an expected voter", n: 3, want: CheckLeader, reason: "not an expected",
			mutate: func(f *Facts, e *Expectation) { e.Voters = e.Voters[1:]; f.Members = f.Members[1:] },
		},
		{
			name: "endpoint unreachable", n: 3, want: CheckEndpoint, member: "c-1", reason: "did not answer",
			mutate: func(f *Facts, _ *Expectation) { f.Endpoints[1] = Endpoint{Member: "c-1"} },
		},
		{
			name: "endpoint missing entirely", n: 3, want: CheckEndpoint, member: "c-2",
			mutate: func(f *Facts, _ *Expectation) { f.Endpoints = f.Endpoints[:2] },
		},
		{
			name: "endpoint unhealthy", n: 3, want: CheckEndpoint, member: "c-2", reason: "not healthy",
			mutate: func(f *Facts, _ *Expectation) { f.Endpoints[2].Healthy = false },
		},
		{
			name: "endpoint reports an error", n: 3, want: CheckEndpoint, member: "c-1", reason: "no leader",
			mutate: func(f *Facts, _ *Expectation) { f.Endpoints[1].Errors = []string{"etcdserver: no leader"} },
		},
		{
			name: "an alarm is not a member down: named as an alarm", n: 3, want: CheckAlarm,
			reason: "NOSPACE alarm raised on c-0, c-1, c-2: the cluster accepts only reads and deletes; compact, defragment and disarm",
			mutate: func(f *Facts, _ *Expectation) { f.Alarms = []Alarm{{3, "NOSPACE"}, {1, "NOSPACE"}, {2, "NOSPACE"}} },
		},
		{
			name: "an alarm raised by the skipped victim still holds the gate", n: 3, want: CheckAlarm, reason: "on c-2",
			mutate: func(f *Facts, e *Expectation) { f.Alarms = []Alarm{{3, "NOSPACE"}}; e.Skip = []string{"c-2"} },
		},
		{
			name: "member far behind the leader", n: 3, want: CheckCaughtUp, member: "c-2", reason: "trails",
			mutate: func(f *Facts, _ *Expectation) { f.Endpoints[2].AppliedIndex = 10 },
		},
		{
			name: "member exactly at tolerance passes", n: 3,
			mutate: func(f *Facts, _ *Expectation) { f.Endpoints[2].AppliedIndex = 1000 - DefaultAppliedIndexTolerance },
		},
		{
			name: "member one past tolerance fails", n: 3, want: CheckCaughtUp, member: "c-2",
			mutate: func(f *Facts, _ *Expectation) { f.Endpoints[2].AppliedIndex = 1000 - DefaultAppliedIndexTolerance - 1 },
		},
		{
			name: "member ahead of the leader's snapshot passes", n: 3,
			mutate: func(f *Facts, _ *Expectation) { f.Endpoints[2].AppliedIndex = 1005 },
		},
		{
			name: "custom tolerance", n: 3, want: CheckCaughtUp, member: "c-1",
			mutate: func(f *Facts, e *Expectation) { e.Tolerance = 5; f.Endpoints[1].AppliedIndex = 990 },
		},
		{
			name: "linearizable read failed", n: 3, want: CheckRead, member: "c-1", reason: "linearizable read",
			mutate: func(f *Facts, _ *Expectation) { f.Endpoints[1].ReadOK = false },
		},
		{
			name: "pod readiness is not an input: a ready-looking member behind still fails", n: 3, want: CheckCaughtUp,
			mutate: func(f *Facts, _ *Expectation) { f.Endpoints[1].AppliedIndex = 0 },
		},
		{
			name: "skipped victim is not judged", n: 3,
			mutate: func(f *Facts, e *Expectation) {
				f.Endpoints[2] = Endpoint{Member: "c-2"}
				e.Skip = []string{"c-2"}
			},
		},
		{
			name: "skipped victim must still be listed", n: 3, want: CheckVoters, member: "c-2",
			mutate: func(f *Facts, e *Expectation) { f.Members = f.Members[:2]; e.Skip = []string{"c-2"} },
		},
		{
			name: "first failure in name order is reported", n: 3, want: CheckEndpoint, member: "c-1",
			mutate: func(f *Facts, _ *Expectation) { f.Endpoints[2].Healthy = false; f.Endpoints[1].Healthy = false },
		},
		{
			name: "endpoint health is judged before catch-up", n: 3, want: CheckEndpoint, member: "c-2",
			mutate: func(f *Facts, _ *Expectation) { f.Endpoints[1].AppliedIndex = 0; f.Endpoints[2].Healthy = false },
		},
		{
			name: "peer URL matches across a scheme change", n: 3,
			mutate: func(f *Facts, e *Expectation) {
				for i := range e.Voters {
					e.Voters[i].PeerURL = strings.Replace(e.Voters[i].PeerURL, "http://", "https://", 1)
				}
			},
		},
		{
			name: "unstarted learner matched by peer URL only", n: 3, want: CheckNoLearner, reason: "not started",
			mutate: func(f *Facts, _ *Expectation) { f.Members[2].Name = ""; f.Members[2].IsLearner = true },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, voters := healthy(tt.n)
			e := Expectation{Voters: voters}
			if tt.mutate != nil {
				tt.mutate(&f, &e)
			}
			got := Gate(f, e)
			if got.Check != tt.want {
				t.Fatalf("Gate() = %v, want check %q", got, tt.want)
			}
			if got.Passed() != (tt.want == "") {
				t.Fatalf("Passed() = %v with check %q", got.Passed(), got.Check)
			}
			if tt.member != "" && got.Member != tt.member {
				t.Errorf("member = %q, want %q (%v)", got.Member, tt.member, got)
			}
			if !strings.Contains(got.Reason, tt.reason) {
				t.Errorf("reason %q does not mention %q", got.Reason, tt.reason)
			}
			if !got.Passed() && got.Reason == "" {
				t.Errorf("a failing check must explain itself")
			}
		})
	}
}

func TestLeader(t *testing.T) {
	tests := []struct {
		name string
		eps  []Endpoint
		want uint64
		ok   bool
	}{
		{name: "none", eps: nil},
		{name: "the leader alone answering", ok: true, want: 3, eps: []Endpoint{
			{Reachable: true, MemberID: 3, LeaderID: 3},
		}},
		{name: "a stale self-proclaimed leader is outvoted", ok: true, want: 2, eps: []Endpoint{
			{Reachable: true, MemberID: 1, LeaderID: 2}, {Reachable: true, MemberID: 2, LeaderID: 2},
			{Reachable: true, MemberID: 3, LeaderID: 3},
		}},
		{name: "majority of followers", ok: true, want: 2, eps: []Endpoint{
			{Reachable: true, MemberID: 1, LeaderID: 2}, {Reachable: true, MemberID: 3, LeaderID: 2},
		}},
		{name: "tie is unknown", eps: []Endpoint{
			{Reachable: true, MemberID: 1, LeaderID: 2}, {Reachable: true, MemberID: 3, LeaderID: 4},
		}},
		{name: "unreachable endpoints do not vote", eps: []Endpoint{
			{MemberID: 1, LeaderID: 1}, {MemberID: 3, LeaderID: 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Facts{Endpoints: tt.eps}.Leader()
			if got != tt.want || ok != tt.ok {
				t.Errorf("Leader() = %d, %v; want %d, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestLearnerCaughtUp(t *testing.T) {
	base := func() Facts {
		f, _ := healthy(3)
		f.Members = append(f.Members, Member{ID: 4, Name: "c-3", PeerURLs: []string{"http://c-3.c.ns.svc:2380"}, IsLearner: true})
		f.Endpoints = append(f.Endpoints, Endpoint{Member: "c-3", Reachable: true, MemberID: 4, LeaderID: 1, AppliedIndex: 995})
		return f
	}
	tests := []struct {
		name   string
		mutate func(f *Facts)
		want   Check
	}{
		{name: "caught up, no read needed"},
		{name: "not answering", want: CheckEndpoint, mutate: func(f *Facts) { f.Endpoints[3].Reachable = false }},
		{name: "no status at all", want: CheckEndpoint, mutate: func(f *Facts) { f.Endpoints = f.Endpoints[:3] }},
		{name: "behind", want: CheckCaughtUp, mutate: func(f *Facts) { f.Endpoints[3].AppliedIndex = 3 }},
		{name: "error", want: CheckEndpoint, mutate: func(f *Facts) { f.Endpoints[3].Errors = []string{"etcdserver: no leader"} }},
		{name: "no leader", want: CheckLeader, mutate: func(f *Facts) {
			for i := range f.Endpoints {
				f.Endpoints[i].LeaderID = 0
			}
		}},
		{name: "leader silent", want: CheckLeader, mutate: func(f *Facts) {
			f.Endpoints[0].Reachable = false
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := base()
			if tt.mutate != nil {
				tt.mutate(&f)
			}
			if got := LearnerCaughtUp(f, "c-3", 0); got.Check != tt.want {
				t.Errorf("LearnerCaughtUp() = %v, want %q", got, tt.want)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	f := Facts{Members: []Member{
		{ID: 1, Name: "a", PeerURLs: []string{"http://a.c.ns.svc:2380"}},
		{ID: 2, Name: "", PeerURLs: []string{"https://b.c.ns.svc:2380/"}},
		{ID: 3, Name: "c", PeerURLs: []string{"http://elsewhere:2380"}},
	}}
	tests := []struct {
		name, member, url string
		want              uint64
	}{
		{name: "by URL", member: "x", url: "http://a.c.ns.svc:2380", want: 1},
		{name: "by URL across scheme and slash", member: "b", url: "http://b.c.ns.svc:2380", want: 2},
		{name: "by name when the URL differs", member: "c", url: "http://c.c.ns.svc:2380", want: 3},
		{name: "no match", member: "d", url: "http://d.c.ns.svc:2380"},
		{name: "empty name never matches an unstarted member", member: "", url: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := f.Match(tt.member, tt.url)
			if ok != (tt.want != 0) || m.ID != tt.want {
				t.Errorf("Match() = %d, %v; want %d", m.ID, ok, tt.want)
			}
		})
	}
}

func TestResultString(t *testing.T) {
	if s := (Result{}).String(); !strings.Contains(s, "passed") {
		t.Errorf("passing result says %q", s)
	}
	r := Result{Check: CheckRead, Reason: "x failed"}
	if s := r.String(); !strings.Contains(s, string(CheckRead)) || !strings.Contains(s, "x failed") {
		t.Errorf("failing result says %q", s)
	}
}
