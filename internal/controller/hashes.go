package controller

import (
	"context"
	"slices"
	"strings"

	"github.com/etcd-steward/steward/internal/etcd"
	"github.com/etcd-steward/steward/internal/health"
)

// hashTargets says whom to ask for HashKV under a CORRUPT alarm, and at which revision: every voter
// of the member list whose Status answered, at the lowest revision they reported. Every one of them
// has applied that revision, so each can hash it; and under CORRUPT etcd refuses writes and
// compactions, so the voters converge on one revision and one compaction point and the hashes
// become comparable within a reconcile or two. (A member that applied an older compaction beyond
// that revision answers ErrCompacted: no answer this time, never a wrong one.) The voters that did
// not answer Status are listed apart, so the evidence names them too.
func hashTargets(f health.Facts) (asked []health.Endpoint, silent []health.Member, rev int64) {
	for _, m := range f.Members {
		if m.IsLearner {
			continue
		}
		i := slices.IndexFunc(f.Endpoints, func(e health.Endpoint) bool { return e.Reachable && e.MemberID == m.ID })
		if i < 0 {
			silent = append(silent, m)
			continue
		}
		e := f.Endpoints[i]
		asked = append(asked, e)
		if rev == 0 || e.Revision < rev {
			rev = e.Revision
		}
	}
	slices.SortFunc(asked, func(a, b health.Endpoint) int { return strings.Compare(a.Member, b.Member) })
	return asked, silent, rev
}

// corruptionHashes reads the evidence a CORRUPT alarm needs, and only then: HashKV makes each member
// read its whole keyspace, too expensive for every reconcile.
func corruptionHashes(ctx context.Context, c *etcd.Client, f health.Facts, endpoints map[string]string) []health.MemberHash {
	if !f.HasAlarm(health.AlarmCorrupt) || !f.MemberListKnown() {
		return nil
	}
	asked, silent, rev := hashTargets(f)
	var out []health.MemberHash
	eps := make([]string, 0, len(asked))
	for _, e := range asked {
		eps = append(eps, endpoints[e.Member])
	}
	for i, h := range c.HashKVs(ctx, eps, rev) {
		mh := health.MemberHash{Member: asked[i].Member, MemberID: h.MemberID, Revision: h.Revision,
			CompactRevision: h.CompactRevision, Hash: h.Hash}
		if h.Err != nil {
			mh.MemberID, mh.Err = asked[i].MemberID, h.Err.Error()
		}
		out = append(out, mh)
	}
	for _, m := range silent {
		out = append(out, health.MemberHash{Member: m.Name, MemberID: m.ID, Err: "its endpoint did not answer Status"})
	}
	return out
}
