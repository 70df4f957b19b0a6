package health

import (
	"slices"
	"strings"
	"testing"
)

// h is an answer at revision 100, compacted at 50.
func h(id uint64, hash uint32) MemberHash {
	return MemberHash{MemberID: id, Revision: 100, CompactRevision: 50, Hash: hash}
}

func unanswered(id uint64) MemberHash {
	return MemberHash{MemberID: id, Err: "context deadline exceeded"}
}

func compacted(hm MemberHash, compact int64) MemberHash { hm.CompactRevision = compact; return hm }

func atRevision(hm MemberHash, rev int64) MemberHash { hm.Revision = rev; return hm }

func ids(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

// Member 1 leads in every case (as in healthy()): the leader's hash is one vote like any other.
func TestEvidence(t *testing.T) {
	const a, b, c = 0xaaaa, 0xbbbb, 0xcccc
	tests := []struct {
		name      string
		voters    []uint64
		hashes    []MemberHash
		found     bool
		unanimous bool
		majority  []uint64
		minority  []uint64
	}{
		// 3 voters: a strict majority is 2.
		{name: "3: all agree", voters: ids(3), hashes: []MemberHash{h(1, a), h(2, a), h(3, a)},
			found: true, unanimous: true, majority: []uint64{1, 2, 3}},
		{name: "3: a follower differs", voters: ids(3), hashes: []MemberHash{h(1, a), h(2, a), h(3, b)},
			found: true, majority: []uint64{1, 2}, minority: []uint64{3}},
		{name: "3: the leader differs (its alarm names a follower): the leader is blamed", voters: ids(3),
			hashes: []MemberHash{h(1, b), h(2, a), h(3, a)}, found: true, majority: []uint64{2, 3}, minority: []uint64{1}},
		{name: "3: all differ", voters: ids(3), hashes: []MemberHash{h(1, a), h(2, b), h(3, c)}},
		{name: "3: one unanswered, two agree: a majority, nobody blamed", voters: ids(3),
			hashes: []MemberHash{h(1, a), h(2, a), unanswered(3)}, found: true, majority: []uint64{1, 2}},
		{name: "3: one unanswered, two differ", voters: ids(3), hashes: []MemberHash{h(1, a), h(2, b), unanswered(3)}},
		{name: "3: only one answered: no majority of all voters", voters: ids(3), hashes: []MemberHash{h(2, a)}},
		{name: "3: none answered", voters: ids(3), hashes: []MemberHash{unanswered(1), unanswered(2), unanswered(3)}},
		{name: "3: another compaction point is not compared", voters: ids(3),
			hashes: []MemberHash{h(1, a), h(2, a), compacted(h(3, b), 60)}, found: true, majority: []uint64{1, 2}},
		{name: "3: another revision is not compared", voters: ids(3),
			hashes: []MemberHash{h(1, a), h(2, a), atRevision(h(3, b), 101)}, found: true, majority: []uint64{1, 2}},
		{name: "3: the same hash at different compaction points is no agreement", voters: ids(3),
			hashes: []MemberHash{h(1, a), compacted(h(2, a), 60), compacted(h(3, a), 70)}},
		{name: "3: a learner's answer is no vote", voters: ids(3), hashes: []MemberHash{h(1, a), h(9, a), h(2, b), unanswered(3)}},
		{name: "3: a member answering twice votes once", voters: ids(3), hashes: []MemberHash{h(1, a), h(1, a), h(2, b)}},
		{name: "3: a voter listed twice counts once", voters: []uint64{1, 2, 3, 3}, hashes: []MemberHash{h(1, a), h(2, a), h(3, b)},
			found: true, majority: []uint64{1, 2}, minority: []uint64{3}},
		// 5 voters: a strict majority is 3.
		{name: "5: all agree", voters: ids(5), hashes: []MemberHash{h(1, a), h(2, a), h(3, a), h(4, a), h(5, a)},
			found: true, unanimous: true, majority: []uint64{1, 2, 3, 4, 5}},
		{name: "5: the leader differs", voters: ids(5), hashes: []MemberHash{h(1, b), h(2, a), h(3, a), h(4, a), h(5, a)},
			found: true, majority: []uint64{2, 3, 4, 5}, minority: []uint64{1}},
		{name: "5: two followers differ alike", voters: ids(5), hashes: []MemberHash{h(1, a), h(2, a), h(3, a), h(4, b), h(5, b)},
			found: true, majority: []uint64{1, 2, 3}, minority: []uint64{4, 5}},
		{name: "5: two different minorities", voters: ids(5), hashes: []MemberHash{h(1, a), h(2, b), h(3, a), h(4, c), h(5, a)},
			found: true, majority: []uint64{1, 3, 5}, minority: []uint64{2, 4}},
		{name: "5: the leader and a follower in two minorities", voters: ids(5),
			hashes: []MemberHash{h(1, b), h(2, a), h(3, a), h(4, a), h(5, c)}, found: true, majority: []uint64{2, 3, 4}, minority: []uint64{1, 5}},
		{name: "5: two against two against one", voters: ids(5), hashes: []MemberHash{h(1, a), h(2, a), h(3, b), h(4, b), h(5, c)}},
		{name: "5: two agree, three unanswered: two of five is no majority", voters: ids(5),
			hashes: []MemberHash{h(1, a), h(2, a), unanswered(3), unanswered(4), unanswered(5)}},
		{name: "5: two agree, one differs, two unanswered", voters: ids(5),
			hashes: []MemberHash{h(1, a), h(2, a), h(3, b), unanswered(4), unanswered(5)}},
		{name: "5: three agree, two unanswered: a majority, nobody blamed", voters: ids(5),
			hashes: []MemberHash{h(1, a), h(2, a), h(3, a), unanswered(4), unanswered(5)}, found: true, majority: []uint64{1, 2, 3}},
		{name: "5: three agree, one differs, one at another compaction point", voters: ids(5),
			hashes: []MemberHash{h(1, a), h(2, a), h(3, a), h(4, b), compacted(h(5, c), 60)},
			found:  true, majority: []uint64{1, 2, 3}, minority: []uint64{4}},
		{name: "5: mismatched compaction points split the majority", voters: ids(5),
			hashes: []MemberHash{h(1, a), h(2, a), compacted(h(3, a), 60), compacted(h(4, a), 60), h(5, b)}},
		{name: "no voters", hashes: []MemberHash{h(1, a)}},
		{name: "1 voter: its own hash is the majority", voters: ids(1), hashes: []MemberHash{h(1, a)},
			found: true, unanimous: true, majority: []uint64{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := Evidence(tt.voters, tt.hashes)
			if e.Found() != tt.found || e.Unanimous() != tt.unanimous {
				t.Errorf("found %v unanimous %v, want %v %v (%+v)", e.Found(), e.Unanimous(), tt.found, tt.unanimous, e)
			}
			sorted := func(s []uint64) []uint64 { s = slices.Clone(s); slices.Sort(s); return s }
			if !slices.Equal(sorted(e.Majority), tt.majority) {
				t.Errorf("majority %v, want %v", e.Majority, tt.majority)
			}
			if !slices.Equal(sorted(e.Minority), tt.minority) {
				t.Errorf("minority %v, want %v", e.Minority, tt.minority)
			}
			if e.Found() && (e.Hash != 0xaaaa || e.Revision != 100 || e.CompactRevision != 50) {
				t.Errorf("majority's hash %x at %d/%d, want aaaa at 100/50", e.Hash, e.Revision, e.CompactRevision)
			}
		})
	}
}

// The voters come from the live member list: a learner is listed but has no vote.
func TestFactsHashEvidence(t *testing.T) {
	f, _ := healthy(3)
	f.Members = append(f.Members, Member{ID: 9, Name: "c-9", IsLearner: true})
	f.Hashes = []MemberHash{h(1, 0xa), h(9, 0xa), h(2, 0xb), unanswered(3)}
	if e := f.HashEvidence(); e.Voters != 3 || e.Found() {
		t.Errorf("a learner's hash counted: %+v", e)
	}
	f.Hashes[3] = h(3, 0xa)
	if e := f.HashEvidence(); !e.Found() || !slices.Equal(e.Minority, []uint64{2}) {
		t.Errorf("c-2 differs from c-0 and c-2: %+v", e)
	}
}

// The summary names every member's hash or why it has none, so a human can check the verdict.
func TestHashSummary(t *testing.T) {
	var f Facts
	if s := f.HashSummary(); s != "no member answered HashKV" {
		t.Errorf("empty: %q", s)
	}
	a, u := h(1, 0x1a2b), unanswered(3)
	a.Member, u.Member = "c-0", "c-2"
	f.Hashes = []MemberHash{a, h(2, 0xff), u}
	want := "c-0 hash 00001a2b at revision 100 (compacted at 50); member 2 hash 000000ff at revision 100 (compacted at 50); " +
		"c-2: no hash (context deadline exceeded)"
	if s := f.HashSummary(); s != want {
		t.Errorf("summary\n %q, want\n %q", s, want)
	}
	if !strings.Contains(f.HashSummary(), "c-2: no hash") {
		t.Error("the unanswered member is not named")
	}
	// etcd reports compact revision -1 before its first compaction: said in words, not as "-1".
	never := h(1, 0x1a2b)
	never.Member, never.CompactRevision = "c-0", -1
	f.Hashes = []MemberHash{never}
	if s, want := f.HashSummary(), "c-0 hash 00001a2b at revision 100 (never compacted)"; s != want {
		t.Errorf("summary %q, want %q", s, want)
	}
}
