package etcd

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// HashKV against a real 3-member cluster, the way the controller reads it under CORRUPT: every
// member at one common revision (the lowest its Status reported), through the cached per-member
// connections. Equal data hash equal at that revision, each answer names its member, an alarm
// standing does not stop the read (CORRUPT refuses writes, not HashKV), a revision compacted away
// is an error, and an unreachable endpoint is an error in the result, not a failed call.
func TestHashKV(t *testing.T) {
	cl, c := startWithClient(t, 3)
	ctx := tctx(t)
	eps := cl.ClientURLs()
	for i := range 20 {
		if _, err := c.c.Put(ctx, fmt.Sprintf("/hash/%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	rev := int64(0)
	var ids []uint64
	for _, s := range c.Statuses(ctx, eps) {
		if s.Err != nil {
			t.Fatalf("%s: %v", s.Endpoint, s.Err)
		}
		if rev == 0 || s.Revision < rev {
			rev = s.Revision
		}
		ids = append(ids, s.MemberID)
	}
	cl.RaiseAlarm(ctx, cl.Members[1], "CORRUPT")
	// Members apply the alarm a heartbeat apart; the hashes must not depend on that.
	time.Sleep(200 * time.Millisecond)
	hs := c.HashKVs(ctx, eps, rev)
	for i, h := range hs {
		if h.Err != nil {
			t.Fatalf("%s under CORRUPT: %v", h.Endpoint, h.Err)
		}
		if h.Endpoint != eps[i] || h.MemberID != ids[i] || h.Revision != rev {
			t.Errorf("%s: answered as %x at revision %d, want %x at %d", h.Endpoint, h.MemberID, h.Revision, ids[i], rev)
		}
		if h.Hash == 0 || h.Hash != hs[0].Hash || h.CompactRevision != hs[0].CompactRevision {
			t.Errorf("%s: hash %08x compacted at %d; %s: %08x at %d", h.Endpoint, h.Hash, h.CompactRevision,
				hs[0].Endpoint, hs[0].Hash, hs[0].CompactRevision)
		}
	}
	if !slices.Equal(ids, []uint64{hs[0].MemberID, hs[1].MemberID, hs[2].MemberID}) {
		t.Errorf("member IDs %x, want %x", []uint64{hs[0].MemberID, hs[1].MemberID, hs[2].MemberID}, ids)
	}
	// A hash at an earlier revision differs: the revision asked for is the one hashed.
	if h := c.HashKV(ctx, eps[0], rev-5); h.Err != nil || h.Hash == hs[0].Hash || h.Revision != rev-5 {
		t.Errorf("at revision %d: %08x (%v), the same as at %d", rev-5, h.Hash, h.Err, rev)
	}
	if err := c.DisarmAlarm(ctx, ids[1], "CORRUPT"); err != nil {
		t.Fatalf("disarming: %v", err)
	}
	if err := c.Compact(ctx, rev-2); err != nil {
		t.Fatalf("compacting: %v", err)
	}
	if h := c.HashKV(ctx, eps[0], rev-5); !errors.Is(h.Err, rpctypes.ErrCompacted) {
		t.Errorf("a compacted revision: %v, want %v", h.Err, rpctypes.ErrCompacted)
	}
	if h := c.HashKV(ctx, eps[0], rev); h.Err != nil || h.CompactRevision != rev-2 {
		t.Errorf("after compaction at %d: compacted at %d (%v)", rev-2, h.CompactRevision, h.Err)
	}
	cl.Kill(cl.Members[2])
	if h := c.HashKV(ctx, eps[2], rev); h.Err == nil {
		t.Errorf("a killed member answered HashKV: %+v", h)
	}
}
