package health

import (
	"fmt"
	"slices"
	"strings"
)

// MemberHash is one voter's answer to HashKV at the revision the controller asked every voter for.
//
// Why the hashes and not the CORRUPT alarm's member ID: etcd's periodic corruption check runs on the
// leader and compares each follower with the leader's own hash, so when the leader is the corrupt
// one the alarm names a healthy follower; its compaction hash check raises CORRUPT with member ID 0
// when it finds no majority. The alarm says that something diverged, never reliably who.
type MemberHash struct {
	// Member is the EtcdMember name of the endpoint asked.
	Member string
	// MemberID is the member that answered (from the response header).
	MemberID uint64
	// Revision is the revision the hash covers; CompactRevision the member's compaction point. etcd
	// hashes the keyspace from the compaction point to the revision, so two hashes say anything
	// about each other only when both match.
	Revision, CompactRevision int64
	Hash                      uint32
	// Err says why the member gave no hash (unreachable, the revision compacted away); "" when it did.
	Err string
}

// HashEvidence is what the voters' hashes say about a CORRUPT alarm.
type HashEvidence struct {
	// Voters is how many voters the member list holds: a majority is of all of them, not of those
	// that answered, so two members out of five agreeing never outvote three that did not answer.
	Voters int
	// Majority are the voters agreeing on Hash at Revision and CompactRevision; nil when no strict
	// majority of Voters agrees on one hash.
	Majority                  []uint64
	Revision, CompactRevision int64
	Hash                      uint32
	// Minority are the voters that answered at the majority's revision and compaction point with
	// another hash: the members whose copy is wrong. Empty without a majority.
	Minority []uint64
}

// Found reports whether a strict majority of the voters agrees on one hash.
func (e HashEvidence) Found() bool { return e.Voters > 0 && len(e.Majority) > e.Voters/2 }

// Unanimous reports whether every voter answered and all agree.
func (e HashEvidence) Unanimous() bool { return e.Found() && len(e.Majority) == e.Voters }

// Evidence judges the voters' hashes: which voters a strict majority of all voters outvotes. Answers
// from members not among voters (a learner still copying, a member already removed) do not count;
// a member answering twice counts once, by its first answer.
func Evidence(voters []uint64, hashes []MemberHash) HashEvidence {
	e := HashEvidence{}
	var counted []uint64
	for _, id := range voters {
		if !slices.Contains(counted, id) {
			counted = append(counted, id)
		}
	}
	e.Voters = len(counted)
	type key struct {
		rev, compact int64
		hash         uint32
	}
	groups := map[key][]uint64{}
	var answers []MemberHash
	seen := map[uint64]bool{}
	for _, h := range hashes {
		if h.Err != "" || seen[h.MemberID] || !slices.Contains(counted, h.MemberID) {
			continue
		}
		seen[h.MemberID] = true
		answers = append(answers, h)
		k := key{h.Revision, h.CompactRevision, h.Hash}
		groups[k] = append(groups[k], h.MemberID)
	}
	for k, ids := range groups {
		// More than half of all voters: at most one group can be that large.
		if len(ids) > e.Voters/2 {
			e.Majority, e.Revision, e.CompactRevision, e.Hash = ids, k.rev, k.compact, k.hash
		}
	}
	if !e.Found() {
		e.Majority = nil
		return e
	}
	for _, h := range answers {
		if h.Revision == e.Revision && h.CompactRevision == e.CompactRevision && h.Hash != e.Hash {
			e.Minority = append(e.Minority, h.MemberID)
		}
	}
	return e
}

// HashEvidence judges the recorded hashes against the voters of the live member list.
func (f Facts) HashEvidence() HashEvidence {
	var voters []uint64
	for _, m := range f.Members {
		if !m.IsLearner {
			voters = append(voters, m.ID)
		}
	}
	return Evidence(voters, f.Hashes)
}

// HashSummary lists every recorded hash for humans, one clause per member:
// "c-0 hash 1a2b3c4d at revision 120 (compacted at 100); c-2: no hash (context deadline exceeded)".
func (f Facts) HashSummary() string {
	if len(f.Hashes) == 0 {
		return "no member answered HashKV"
	}
	parts := make([]string, 0, len(f.Hashes))
	for _, h := range f.Hashes {
		name := h.Member
		if name == "" {
			name = fmt.Sprintf("member %x", h.MemberID)
		}
		if h.Err != "" {
			parts = append(parts, fmt.Sprintf("%s: no hash (%s)", name, h.Err))
			continue
		}
		compacted := fmt.Sprintf("compacted at %d", h.CompactRevision)
		if h.CompactRevision < 0 {
			compacted = "never compacted" // etcd's -1 before its first compaction
		}
		parts = append(parts, fmt.Sprintf("%s hash %08x at revision %d (%s)", name, h.Hash, h.Revision, compacted))
	}
	return strings.Join(parts, "; ")
}
