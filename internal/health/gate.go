package health

import (
	"fmt"
	"sort"
	"strings"
)

// DefaultAppliedIndexTolerance is how far (in raft entries) a member's applied index may trail the
// leader's and still count as caught up.
//
// Why not zero: the leader's and the member's Status are two RPCs made one after the other, and a
// healthy follower applies an entry one heartbeat round after the leader commits it, so under client
// load a perfectly healthy follower trails by (write rate x RPC skew): about 50 entries at 10,000
// writes/s and 5 ms. A strict equality would keep the gate flapping on a busy cluster.
//
// Why not more: a member that is really behind is behind by far more than that. A member restarting
// replays from its last snapshot (etcd snapshots every 10,000 entries by default and keeps 5,000
// entries for catching followers up), and a replacement memory member starts at 0; both sit
// thousands of entries back until they have caught up. 100 separates the two cases, and the
// linearizable read through the member (checked after this) is the strict proof that it serves
// current data: a ReadIndex read only answers once the member has applied up to the leader's commit.
const DefaultAppliedIndexTolerance uint64 = 100

// Check names one test of the gate, in the order they run.
type Check string

const (
	CheckMemberList Check = "MemberList"       // the live member list was read
	CheckNoLearner  Check = "NoLearner"        // no learner in the member list
	CheckVoters     Check = "ExpectedVoters"   // exactly the expected voters are listed
	CheckLeader     Check = "Leader"           // a leader is known, and it is an expected voter
	CheckAlarm      Check = "NoAlarm"          // no alarm is active in the cluster
	CheckEndpoint   Check = "EndpointHealthy"  // each endpoint answered, is healthy, reports no error
	CheckCaughtUp   Check = "AppliedIndex"     // each member's applied index reached the leader's
	CheckRead       Check = "LinearizableRead" // a linearizable read through each member succeeded
)

// Voter is a member expected in the member list as a voter.
type Voter struct {
	Name    string
	PeerURL string
}

// Expectation says what a recovered cluster looks like.
type Expectation struct {
	// Voters are every member that should be a voter; the list must hold exactly these.
	Voters []Voter
	// Skip names voters whose endpoint is not judged: the member about to be disrupted. Its health
	// does not decide whether disrupting it is safe (the disruption check does the quorum arithmetic),
	// and an unready outdated member must be rollable, or it could never be fixed by a roll.
	Skip []string
	// Tolerance overrides DefaultAppliedIndexTolerance when non-zero.
	Tolerance uint64
	// AllowNoSpace lets the gate pass while NOSPACE is the only alarm: the defragmentations that
	// recover from it are themselves gated, one member at a time.
	AllowNoSpace bool
	// AllowCorrupt lets the gate pass while CORRUPT is the only alarm, whichever member it names:
	// the member about to be replaced for it is chosen by the voters' hashes, not by the alarm
	// (etcd's leader-side check names a healthy follower when the leader is the corrupt one).
	AllowCorrupt bool
}

// Result is the gate's verdict: the first failing check, or none.
type Result struct {
	Check  Check  // empty when the gate passed
	Member string // the member the failing check is about, if any
	Reason string // a sentence for humans (RollingUpdate=WaitingForHealth's message)
}

// Passed reports whether every check passed.
func (r Result) Passed() bool { return r.Check == "" }

func (r Result) String() string {
	if r.Passed() {
		return "recovery gate passed"
	}
	return fmt.Sprintf("%s: %s", r.Check, r.Reason)
}

func fail(c Check, member, format string, args ...any) Result {
	return Result{Check: c, Member: member, Reason: fmt.Sprintf(format, args...)}
}

// Gate runs the recovery gate (invariant 4, docs/design.md). Checks run in a fixed order so the reason
// reported is stable from one reconcile to the next.
func Gate(f Facts, e Expectation) Result {
	tol := e.Tolerance
	if tol == 0 {
		tol = DefaultAppliedIndexTolerance
	}
	if !f.MemberListKnown() {
		return fail(CheckMemberList, "", "the member list could not be read: %s", f.MemberListErr)
	}
	if r := checkMembership(f, e.Voters); !r.Passed() {
		return r
	}
	leaderID, ok := f.Leader()
	if !ok {
		return fail(CheckLeader, "", "no endpoint agrees on a leader")
	}
	leader, ok := f.endpointByID(leaderID)
	if !ok || !isExpected(f, e.Voters, leaderID) {
		return fail(CheckLeader, "", "leader %x is not an expected, reachable voter", leaderID)
	}
	// An alarm is cluster-wide (replicated), so the victim's own counts too: a cluster refusing
	// writes must not also lose a member; the user recovers it first (compact, defragment, disarm).
	if len(f.Alarms) > 0 && !(e.AllowNoSpace && f.OnlyAlarm(AlarmNoSpace)) && !(e.AllowCorrupt && f.OnlyAlarm(AlarmCorrupt)) {
		return fail(CheckAlarm, "", "%s", f.AlarmMessage())
	}
	judged := judgedVoters(e)
	for _, v := range judged {
		if r := checkEndpoint(f, v); !r.Passed() {
			return r
		}
	}
	for _, v := range judged {
		if r := checkCaughtUp(f, v, leader, tol); !r.Passed() {
			return r
		}
	}
	for _, v := range judged {
		if ep, _ := f.Endpoint(v.Name); !ep.ReadOK {
			return fail(CheckRead, v.Name, "a linearizable read through %s did not succeed", v.Name)
		}
	}
	return Result{}
}

// checkMembership: no learner, every expected voter listed as a voter, nothing else listed.
func checkMembership(f Facts, voters []Voter) Result {
	for _, m := range f.Members {
		if m.IsLearner {
			return fail(CheckNoLearner, m.Name, "learner %x (%s) is still in the member list", m.ID, displayName(m))
		}
	}
	matched := map[uint64]bool{}
	for _, v := range voters {
		m, ok := f.Match(v.Name, v.PeerURL)
		if !ok {
			return fail(CheckVoters, v.Name, "%s is not in the member list", v.Name)
		}
		matched[m.ID] = true
	}
	for _, m := range f.Members {
		if !matched[m.ID] {
			return fail(CheckVoters, m.Name, "unexpected member %x (%s) in the member list", m.ID, displayName(m))
		}
	}
	return Result{}
}

func isExpected(f Facts, voters []Voter, id uint64) bool {
	for _, v := range voters {
		if m, ok := f.Match(v.Name, v.PeerURL); ok && m.ID == id {
			return true
		}
	}
	return false
}

// judgedVoters returns the voters whose endpoints are judged, sorted by name for a stable reason.
func judgedVoters(e Expectation) []Voter {
	skip := map[string]bool{}
	for _, s := range e.Skip {
		skip[s] = true
	}
	var out []Voter
	for _, v := range e.Voters {
		if !skip[v.Name] {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func checkEndpoint(f Facts, v Voter) Result {
	ep, ok := f.Endpoint(v.Name)
	switch {
	case !ok || !ep.Reachable:
		return fail(CheckEndpoint, v.Name, "%s's endpoint did not answer", v.Name)
	case len(ep.Errors) > 0:
		return fail(CheckEndpoint, v.Name, "%s reports %s", v.Name, strings.Join(ep.Errors, ", "))
	case !ep.Healthy:
		return fail(CheckEndpoint, v.Name, "%s is not healthy", v.Name)
	}
	return Result{}
}

func checkCaughtUp(f Facts, v Voter, leader Endpoint, tol uint64) Result {
	ep, _ := f.Endpoint(v.Name)
	if ep.AppliedIndex+tol < leader.AppliedIndex {
		return fail(CheckCaughtUp, v.Name, "%s applied index %d trails the leader's %d by more than %d",
			v.Name, ep.AppliedIndex, leader.AppliedIndex, tol)
	}
	return Result{}
}

// LearnerCaughtUp says whether a learner may be promoted: its endpoint answers and its applied index
// reached the leader's. etcd refuses the promotion itself while the learner is behind (it wants 90%
// of the leader's progress); this check keeps the operator from hammering MemberPromote before then.
// No read check: learners refuse linearizable reads.
func LearnerCaughtUp(f Facts, learner string, tolerance uint64) Result {
	if tolerance == 0 {
		tolerance = DefaultAppliedIndexTolerance
	}
	leaderID, ok := f.Leader()
	if !ok {
		return fail(CheckLeader, "", "no endpoint agrees on a leader")
	}
	leader, ok := f.endpointByID(leaderID)
	if !ok {
		return fail(CheckLeader, "", "leader %x did not answer", leaderID)
	}
	ep, ok := f.Endpoint(learner)
	if !ok || !ep.Reachable {
		return fail(CheckEndpoint, learner, "learner %s's endpoint did not answer", learner)
	}
	if len(ep.Errors) > 0 {
		return fail(CheckEndpoint, learner, "learner %s reports %s", learner, strings.Join(ep.Errors, ", "))
	}
	return checkCaughtUp(f, Voter{Name: learner}, leader, tolerance)
}

func displayName(m Member) string {
	if m.Name == "" {
		return "not started"
	}
	return m.Name
}
