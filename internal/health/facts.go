// Package health is Steward's recovery gate: a pure evaluation of facts read live from etcd that
// says whether the cluster has recovered from the previous step and may take the next disruption.
//
// The gate never looks at Pod readiness. A Pod that is Ready only says the etcd process answers its
// probe; a member that rejoined empty (memory storage) or is replaying its log answers too, long
// before it holds the data. Only etcd's own view counts: the member list, every endpoint's status,
// the applied index against the leader's, and a linearizable read through each member.
//
// Nothing here does I/O or reads a clock: the controller gathers Facts, the gate judges them.
package health

import (
	"fmt"
	"slices"
	"strings"
)

// Member is one entry of etcd's live member list.
type Member struct {
	ID        uint64
	Name      string // empty for a learner whose process has not started yet
	PeerURLs  []string
	IsLearner bool
}

// Endpoint is what one member's client endpoint reported when the controller asked it.
type Endpoint struct {
	// Member is the EtcdMember name this endpoint belongs to.
	Member string
	// Reachable is true when the Status call answered; Err says why it did not.
	Reachable bool
	Err       string
	// Healthy is true when the member answered, knows a leader and reported no error. Alarms do not
	// count against it: they are cluster-wide facts (Facts.Alarms), not a member being down.
	Healthy bool
	// MemberID is the ID of the member that answered (from the response header).
	MemberID uint64
	// ClusterID is the ID of the cluster the answering member belongs to (from the header).
	ClusterID uint64
	// LeaderID is the leader this member believes in; 0 when it knows none.
	LeaderID uint64
	// AppliedIndex is the member's raft applied index.
	AppliedIndex uint64
	// Version is the etcd server version it reports.
	Version string
	// StorageVersion is the storage version of its data it reports (etcd 3.6+, once the cluster
	// version reached 3.6; "3.6.0"); "" when it reports none.
	StorageVersion string
	// DowngradeEnabled and DowngradeTarget are etcd's downgrade state as this member reports it
	// (etcd 3.6+; a 3.5 member reports none, even while a downgrade is enabled).
	DowngradeEnabled bool
	DowngradeTarget  string
	// Errors are the errors the Status call reported other than alarms ("etcdserver: no leader").
	Errors []string
	// DBSize and DBSizeInUse are the member's backend file size and the part in use, in bytes;
	// DBSizeQuota its quota when it reports one (etcd 3.6+), else 0.
	DBSize, DBSizeInUse, DBSizeQuota int64
	// RaftIndex is the member's raft index: how much of the log it holds (a quorum recovery's
	// survivor is the member with the most).
	RaftIndex uint64
	// Revision is the store revision the member had applied.
	Revision int64
	// ReadOK is true when a linearizable read through this endpoint succeeded. Learners do not serve
	// such reads, so it is only meaningful for voters.
	ReadOK bool
}

// Facts are the live etcd reads one reconcile made.
type Facts struct {
	// MemberListErr says why the member list could not be read; empty when it was. MemberList is
	// linearizable in the etcd versions Steward supports, so it fails when quorum is lost.
	MemberListErr string
	Members       []Member
	Endpoints     []Endpoint
	// Alarms are the cluster's active alarms, as the endpoints that answered reported them.
	Alarms []Alarm
	// Hashes are the voters' HashKV answers at one common revision, read only while a CORRUPT alarm
	// is active (hashing the whole keyspace is expensive): the evidence of which copy is wrong.
	Hashes []MemberHash
	// ClusterVersion is the cluster version ("3.6.0") a voter's /version reported: the version the
	// whole cluster speaks, which etcd raises only once every member runs the newer minor and lowers
	// with a downgrade. "" when no voter was asked or none answered.
	ClusterVersion string
}

// Alarm is an active etcd alarm. etcd replicates alarms through raft: one raised by a member is in
// every member's list, and NOSPACE refuses writes (other than deletes) on all of them.
type Alarm struct {
	MemberID uint64
	Type     string // NOSPACE, CORRUPT
}

// Alarm types etcd raises.
const (
	AlarmNoSpace = "NOSPACE"
	AlarmCorrupt = "CORRUPT"
)

// HasAlarm says whether an alarm of the type is active.
func (f Facts) HasAlarm(typ string) bool {
	for _, a := range f.Alarms {
		if a.Type == typ {
			return true
		}
	}
	return false
}

// OnlyAlarm says whether alarms are active and all of them are of the type.
func (f Facts) OnlyAlarm(typ string) bool {
	for _, a := range f.Alarms {
		if a.Type != typ {
			return false
		}
	}
	return len(f.Alarms) > 0
}

// MemberListKnown reports whether the live member list was read.
func (f Facts) MemberListKnown() bool { return f.MemberListErr == "" }

// Endpoint returns the status of the named member's endpoint.
func (f Facts) Endpoint(member string) (Endpoint, bool) {
	for _, e := range f.Endpoints {
		if e.Member == member {
			return e, true
		}
	}
	return Endpoint{}, false
}

// Match finds the live entry of a member. Peer URL first, because a member's name is only known to
// etcd once its process started, and IDs are never trusted from cache (invariant 5); the name is
// a fallback so a peer URL spelled differently (scheme, trailing slash) does not orphan a member.
func (f Facts) Match(name, peerURL string) (Member, bool) {
	want := normalizeURL(peerURL)
	for _, m := range f.Members {
		for _, u := range m.PeerURLs {
			if want != "" && normalizeURL(u) == want {
				return m, true
			}
		}
	}
	for _, m := range f.Members {
		if name != "" && m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

// normalizeURL drops the scheme and a trailing slash: a TLS change switches http to https while the
// member stays the same.
func normalizeURL(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
	}
	return strings.TrimSuffix(u, "/")
}

// Leader returns the leader's ID: the one most reachable endpoints report (a stale leader cut off
// by a partition still names itself, but the others outvote it). A tie or no answer means unknown.
func (f Facts) Leader() (uint64, bool) {
	votes := map[uint64]int{}
	for _, e := range f.Endpoints {
		if e.Reachable && e.LeaderID != 0 {
			votes[e.LeaderID]++
		}
	}
	var best uint64
	bestN, tie := 0, false
	for id, n := range votes {
		switch {
		case n > bestN:
			best, bestN, tie = id, n, false
		case n == bestN:
			tie = true
		}
	}
	if bestN == 0 || tie {
		return 0, false
	}
	return best, true
}

// endpointByID returns the status reported by the member with this ID.
func (f Facts) endpointByID(id uint64) (Endpoint, bool) {
	for _, e := range f.Endpoints {
		if e.Reachable && e.MemberID == id {
			return e, true
		}
	}
	return Endpoint{}, false
}

// What each alarm means for the cluster and what the user does about it. Steward does not disarm on
// its own: a NOSPACE disarmed without freeing space is raised again by the next write, and freeing
// space means deciding which data to compact away, which is the user's call.
var alarmAdvice = map[string]string{
	"NOSPACE": "the cluster accepts only reads and deletes; compact, defragment and disarm (etcdctl alarm disarm)",
	"CORRUPT": "etcd found members' data inconsistent and refuses writes; replace the corrupt member or restore from a backup, then disarm",
}

// AlarmMessage describes the active alarms for humans, one clause per type:
// "NOSPACE alarm raised on demo-0, demo-1: the cluster accepts only reads and deletes; ...".
// Members are named from the live member list, by ID otherwise. Empty when no alarm is active.
func (f Facts) AlarmMessage() string {
	on := map[string][]string{}
	for _, a := range f.Alarms {
		name := fmt.Sprintf("member %x", a.MemberID)
		for _, m := range f.Members {
			if m.ID == a.MemberID && m.Name != "" {
				name = m.Name
			}
		}
		if !slices.Contains(on[a.Type], name) {
			on[a.Type] = append(on[a.Type], name)
		}
	}
	var parts []string
	for _, t := range sortedKeys(on) {
		slices.Sort(on[t])
		advice, ok := alarmAdvice[t]
		if !ok {
			advice = "see etcd's documentation for this alarm, then disarm (etcdctl alarm disarm)"
		}
		parts = append(parts, fmt.Sprintf("%s alarm raised on %s: %s", t, strings.Join(on[t], ", "), advice))
	}
	return strings.Join(parts, "; ")
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
