package plan

import (
	"slices"
	"time"

	"fmt"
	"sort"
	"strconv"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/health"
)

// view joins the facts once: each member with its live etcd entry and endpoint, by peer URL.
type view struct {
	f       *Facts
	lim     Limits
	target  stewardv1.MemberTemplate
	members []*memberView // by ordinal
	orphans []health.Member
	// sources are the live members of a cluster being adopted that Steward did not create
	// (adoption.go); while it adopts, no live member is an orphan.
	sources  []*memberView
	leaderID uint64
}

type memberView struct {
	*Member
	live   *health.Member
	ep     *health.Endpoint
	leader bool
	change Change
}

func newView(f *Facts) *view {
	v := &view{f: f, lim: f.Limits.withDefaults()}
	if o := f.Cluster.Status.Observed; o != nil {
		v.target = *o
	} else {
		v.target = f.specTemplate()
	}
	v.leaderID, _ = f.Etcd.Leader()
	claimed := map[uint64]bool{}
	for i := range f.Members {
		m := &memberView{Member: &f.Members[i]}
		if f.Etcd.MemberListKnown() {
			if l, ok := f.Etcd.Match(m.Name, m.PeerURL); ok {
				m.live = &l
				claimed[l.ID] = true
				m.leader = l.ID == v.leaderID && v.leaderID != 0
			}
		}
		if ep, ok := f.Etcd.Endpoint(m.Name); ok {
			m.ep = &ep
		}
		v.members = append(v.members, m)
	}
	for _, l := range f.Etcd.Members {
		switch {
		case claimed[l.ID]:
		case f.Adopting():
			s := &memberView{Member: &Member{Name: SourceName(l)}, live: &l, leader: l.ID == v.leaderID && v.leaderID != 0}
			if len(l.PeerURLs) > 0 {
				s.PeerURL = l.PeerURLs[0]
			}
			if ep, ok := f.Etcd.Endpoint(s.Name); ok {
				s.ep = &ep
			}
			v.sources = append(v.sources, s)
		default:
			v.orphans = append(v.orphans, l)
		}
	}
	sort.Slice(v.members, func(i, j int) bool { return v.members[i].Ordinal < v.members[j].Ordinal })
	v.setTarget(v.target)
	return v
}

// setTarget (re)classifies every member against a target template.
func (v *view) setTarget(t stewardv1.MemberTemplate) {
	v.target = t
	for _, m := range v.members {
		m.change = Compare(m.Template, t, v.f.medium())
		if m.change.Has(ChangeResize) && v.resizeGivenUp(m) != "" {
			m.change = m.change&^ChangeResize | ChangeRoll
		}
		if m.TrustOutdated || v.podBehind(m) || v.podAwayFrom(m, t) {
			m.change |= ChangeRoll
		}
		if expansionNeeded(m.PVC, t, v.f.medium()) {
			m.change |= ChangeExpand
		}
	}
}

// podAwayFrom: the member's record needs no roll to reach t, but its Pod, restarted in place, runs
// a template that does. An in-place restart patches the Pod (image and template) first and records
// the member after; a target changed in between (a downgrade cancelled while a member restarted onto
// the older image: CI, stop 43) left the record on the new target and the Pod on the old one, and
// the cluster was called Reconciled with a member on the older version. Only the Pod says what
// runs then. (A Pod Steward built is built from the record, so without an in-place restart the two
// agree.)
func (v *view) podAwayFrom(m *memberView, t stewardv1.MemberTemplate) bool {
	return m.Pod.Exists && !m.Pod.Deleting && m.Pod.Template != nil && m.Pod.RestartedFrom != "" &&
		!Compare(m.Template, t, v.f.medium()).Has(ChangeRoll) && Compare(*m.Pod.Template, t, v.f.medium()).Has(ChangeRoll)
}

// podBehind: the member's Pod is not the Pod this Steward builds for the cluster now: an older
// Steward built it (one that rendered member Pods differently), or it runs with the revocation list
// where the spec no longer asks for one or without it where it does. Only a rebuild brings it there
// (a Pod being deleted is on its way).
func (v *view) podBehind(m *memberView) bool {
	return v.olderSteward(m) || v.crlBehind(m)
}

// olderSteward: an older Steward built the member's Pod (an operator upgrade).
func (v *view) olderSteward(m *memberView) bool {
	return v.f.PodRevision > 0 && m.Pod.Exists && !m.Pod.Deleting && m.Pod.Revision < v.f.PodRevision
}

// crlBehind: the Pod's etcd does (not) check the revocation list the spec asks (not) to check.
func (v *view) crlBehind(m *memberView) bool {
	return m.Pod.Exists && !m.Pod.Deleting && m.Pod.ServesCRL != v.f.CRL
}

func (m *memberView) inEtcd() bool  { return m.live != nil }
func (m *memberView) voter() bool   { return m.live != nil && !m.live.IsLearner }
func (m *memberView) learner() bool { return m.live != nil && m.live.IsLearner }

func (m *memberView) id() uint64 {
	if m.live != nil {
		return m.live.ID
	}
	return 0
}

// healthy is etcd's view of the member; Pod readiness alone never counts.
func (m *memberView) healthy() bool {
	return m.ep != nil && m.ep.Reachable && m.ep.Healthy && len(m.ep.Errors) == 0
}

// caughtUp: the member's applied index reached the leader's (within the gate's tolerance). Unknown
// when no leader answers, which counts as not caught up: nothing is proven.
func (v *view) caughtUp(m *memberView) bool {
	if m.ep == nil {
		return false
	}
	leader, ok := v.f.Etcd.Leader()
	if !ok {
		return false
	}
	for _, e := range v.f.Etcd.Endpoints {
		if e.Reachable && e.MemberID == leader {
			return m.ep.AppliedIndex+v.lim.AppliedIndexTolerance >= e.AppliedIndex
		}
	}
	return false
}

// inFlightPhase: a membership step of the operator is under way on this member.
func (m *memberView) inFlightPhase() bool {
	switch m.Phase {
	case stewardv1.MemberJoining, stewardv1.MemberLearner, stewardv1.MemberRemoving:
		return true
	}
	return false
}

// readyVoter: a full voter serving right now: etcd answers healthy for it (caught up or not), its Pod is
// ready and staying, and no membership step of the operator is under way on it. Status counts these
// (readyMembers, a member's ready), and the roll and the leader hand-over prefer them.
func (m *memberView) readyVoter() bool {
	return m.voter() && m.healthy() && m.Pod.Exists && m.Pod.readyNow() && !m.Pod.Deleting &&
		!m.Deleting && !m.inFlightPhase()
}

// crashLooping: restarting over and over, now, for a reason a fresh member can fix. An OOM kill is
// not one: a replacement gets the same memory limit and dies the same way; the user has to raise it.
// Nor is an etcd the data check refused for its version: the data is fine, the version is not.
func (v *view) crashLooping(m *memberView) bool {
	return v.restartLooping(m) && m.Pod.LastTerminationReason != "OOMKilled" && m.Pod.VersionRefused == ""
}

func (v *view) oomLooping(m *memberView) bool {
	return v.restartLooping(m) && m.Pod.LastTerminationReason == "OOMKilled"
}

// restartLooping is a crash loop as etcd and the kubelet both see it, never a lifetime restart count
// alone (six restarts gathered over months say nothing about a Pod that is briefly unready while it
// replays its WAL or defragments). All must hold: the Pod has been unready for the whole window; its
// etcd container crashed within the window or the kubelet is backing off; its endpoint did not
// answer (a member that answers holds data etcd accepts, so it is never wiped for restarts); its
// last crash came during a start; and it crashed more often than the threshold.
// crashWhileStarting: a crash this long after the Pod went unready happened during a start.
const crashWhileStarting = 5 * time.Second

func (v *view) restartLooping(m *memberView) bool {
	p, l, now := m.Pod, v.lim, v.f.Now
	// The crash the kubelet is backing off from is not counted in RestartCount yet.
	crashes := p.RestartCount
	if p.BackOff {
		crashes++
	}
	if !p.Exists || p.Ready || p.Deleting || p.Failed || crashes <= l.CrashLoopRestarts {
		return false
	}
	if m.ep != nil && m.ep.Reachable {
		return false
	}
	recentCrash := p.BackOff || (!p.LastTerminatedAt.IsZero() && now.Sub(p.LastTerminatedAt) <= l.CrashLoopWindow)
	unreadyLong := !p.NotReadySince.IsZero() && now.Sub(p.NotReadySince) >= l.CrashLoopWindow
	// The last crash came while starting, after the Pod had gone unready, not while it served: a
	// member killed again and again while Ready in between (its data fine) waits out the kubelet's
	// growing back-off unready, which alone would look like a loop once the back-off passes the window.
	crashedStarting := !p.LastTerminatedAt.IsZero() && p.LastTerminatedAt.Sub(p.NotReadySince) >= crashWhileStarting
	return recentCrash && unreadyLong && crashedStarting
}

func (m *memberView) recordedID() string { return strconv.FormatUint(m.id(), 16) }

func orphanName(id uint64) string { return fmt.Sprintf("unknown-member-%x", id) }

// active are the members not being deleted, by ordinal.
func (v *view) active() []*memberView {
	var out []*memberView
	for _, m := range v.members {
		if !m.Deleting {
			out = append(out, m)
		}
	}
	return out
}

// kept reports whether a member survives the pending scale-in: every active member but the
// surplus (surplus: the highest ordinals; on memory storage outdated members first).
func (v *view) kept(m *memberView) bool {
	return !m.Deleting && !slices.Contains(v.surplus(), m)
}

// DisruptionView is the cluster as disruption.Check sees it, built from the same facts the plan
// used. The controller passes it, with Action.Disruption, to a disruption.Disrupter.
func (f *Facts) DisruptionView() disruption.Cluster {
	return newView(f).disruptionView()
}

func (v *view) disruptionView() disruption.Cluster {
	c := disruption.Cluster{
		Medium:          v.f.medium(),
		AllowDowntime:   v.f.Cluster.Spec.UpdateStrategy.AllowDowntime,
		Dormant:         v.f.replicas() == 0,
		MemberListKnown: v.f.Etcd.MemberListKnown(),
		NeverFormed:     !v.formed(),
	}
	c.Recovering = v.recoveryInProgress() != nil
	c.QuorumShown = v.quorumShown()
	for _, m := range v.members {
		c.Members = append(c.Members, disruption.Member{
			Name: m.Name, ID: m.id(), Voter: m.voter(), Learner: m.learner(), Leader: m.leader,
			Healthy: m.healthy() && v.caughtUp(m), PodExists: m.Pod.Exists, PodReady: m.Pod.readyNow(),
			PodDeleting: m.Pod.Deleting, PodFailed: m.Pod.Failed, InFlight: v.inFlight(m), Replacing: v.replacing(m),
			Lost: v.lossDue(m), Evicting: v.evicting(m),
		})
	}
	for _, s := range v.sources {
		// A source member runs in a Pod Steward does not manage: etcd's view of it is all there is.
		c.Members = append(c.Members, disruption.Member{
			Name: s.Name, ID: s.id(), Voter: s.voter(), Learner: s.learner(), Leader: s.leader,
			Healthy: s.healthy() && v.caughtUp(s), PodExists: true, PodReady: s.healthy(),
		})
	}
	for _, o := range v.orphans {
		// Nobody answers for an orphan's endpoint: it counts as disrupted until it is removed.
		c.Members = append(c.Members, disruption.Member{
			Name: orphanName(o.ID), ID: o.ID, Voter: !o.IsLearner, Learner: o.IsLearner,
			Leader: o.ID == v.leaderID && v.leaderID != 0,
		})
	}
	return c
}

// inFlight: a step of the operator is under way on the member. A member whose removal is only
// intended (still a voter in the live list) is judged by what it does, serving or not: an intent
// alone disrupts nobody, and counting it would keep the repair of another member from running
// while the removal itself waits for that repair.
func (v *view) inFlight(m *memberView) bool {
	switch {
	case m.Phase == stewardv1.MemberJoining || m.Phase == stewardv1.MemberLearner:
		return true
	case m.inEtcd() && m.Phase == stewardv1.MemberPending:
		return true
	case (m.Deleting || m.Phase == stewardv1.MemberRemoving) && !m.voter():
		return true
	case m.Defrag != nil && m.Defrag.StartedAt != nil && defragEnded(m) == "":
		// Defragmenting: it serves nothing until done (defragInterrupted closes the record). A
		// record whose etcd is gone is no disruption in flight: the member is judged as it is.
		return true
	}
	return false
}

// replacing: the member left etcd to be replaced (or behind the operator's back) and is not a voter
// again yet; the cluster is a voter short. Phase Removing without the record counts too, for
// members an older Steward started replacing.
func (v *view) replacing(m *memberView) bool {
	return !m.Deleting && !m.voter() && (m.Replacing || m.Phase == stewardv1.MemberRemoving)
}

// check runs disruption.Check for a request on this view.
func (v *view) check(kind disruption.Kind, victim string) error {
	return disruption.Check(v.disruptionView(), disruption.Request{Kind: kind, Victim: victim})
}

// expectedVoters are the members meant to be voters: every member not being deleted, whatever its
// phase, so a member removed for replacement keeps the gate shut until its successor is a voter
// again. Members a pending scale-down will remove are still expected until they go.
func (v *view) expectedVoters() []health.Voter {
	var out []health.Voter
	for _, m := range v.active() {
		out = append(out, health.Voter{Name: m.Name, PeerURL: m.PeerURL})
	}
	return append(out, v.sourceExpected()...)
}

// sourceExpected: the source's voters are expected voters while they are still in etcd; each
// leaves only by the hand-over's own removal.
func (v *view) sourceExpected() []health.Voter {
	var out []health.Voter
	for _, s := range v.sourceVoters() {
		out = append(out, health.Voter{Name: s.Name, PeerURL: s.PeerURL})
	}
	return out
}

// gate runs the recovery gate over the expected voters, skipping the named victims.
func (v *view) gate(skip ...string) health.Result {
	return health.Gate(v.f.Etcd, health.Expectation{
		Voters: v.expectedVoters(), Skip: skip, Tolerance: v.lim.AppliedIndexTolerance,
	})
}

// gateRunning runs the gate over the members that are voters now (Running, including one a
// scale-down has yet to remove); used before adding a member, when the newcomer is not expected yet.
func (v *view) gateRunning() health.Result {
	var voters []health.Voter
	for _, m := range v.members {
		if m.Phase == stewardv1.MemberRunning {
			voters = append(voters, health.Voter{Name: m.Name, PeerURL: m.PeerURL})
		}
	}
	voters = append(voters, v.sourceExpected()...)
	return health.Gate(v.f.Etcd, health.Expectation{Voters: voters, Tolerance: v.lim.AppliedIndexTolerance})
}

// leadershipTarget picks who takes over from a leader about to be disrupted: a healthy voter that is
// kept, preferring one already on the target template, then the lowest ordinal (the highest go first
// on scale-in, so the lowest is least likely to be disrupted next).
// Only members allow accepts are considered (nil: every one).
func (v *view) leadershipTarget(from *memberView, allow func(*memberView) bool) *memberView {
	var best *memberView
	score := func(m *memberView) int {
		s := 0
		if v.kept(m) {
			s += 2
		}
		if !m.change.Has(ChangeRoll) {
			s++
		}
		return s
	}
	for _, m := range v.members {
		if m == from || !m.readyVoter() || (allow != nil && !allow(m)) {
			continue
		}
		if best == nil || score(m) > score(best) {
			best = m
		}
	}
	return best
}

// moveLeader hands leadership away from m before it is disrupted (invariant 2).
func (v *view) moveLeader(m *memberView, why string) Action {
	return v.moveLeaderAmong(m, why, nil)
}

// moveLeaderAmong is moveLeader to a member allow accepts: a corrupt leader must not hand over to
// another member whose copy is wrong.
func (v *view) moveLeaderAmong(m *memberView, why string, allow func(*memberView) bool) Action {
	t := v.leadershipTarget(m, allow)
	if t == nil {
		return wait(ReasonNoLeadershipTarget, "%s leads and no other healthy voter can take over before %s", m.Name, why)
	}
	return moveLeaderAction(m, t, "moving leadership from %s to %s before %s", m.Name, t.Name, why)
}

// moveLeaderAction is the MoveLeader action from m to t, described by format and args.
func moveLeaderAction(m, t *memberView, format string, args ...any) Action {
	a := act(MoveLeader, m.Name, ReasonMovingLeader, format, args...)
	a.MemberID, a.Target, a.TargetID = m.id(), t.Name, t.id()
	return a
}
