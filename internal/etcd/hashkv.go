package etcd

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// HashKVTimeout bounds one member's HashKV: the member reads and hashes every key revision from its
// compaction point up, seconds on a large database, far beyond CallTimeout.
const HashKVTimeout = time.Minute

// KVHash is one member's hash of its keyspace at a revision.
type KVHash struct {
	Endpoint string
	// MemberID is the member that answered (from the response header).
	MemberID uint64
	// Revision is the revision hashed; CompactRevision the member's compaction point, where the
	// hash starts. Hashes of two members are comparable only when both match.
	Revision, CompactRevision int64
	Hash                      uint32
	Err                       error
}

// HashKV asks one endpoint for the hash of its keyspace at rev (0: its latest). A failure is
// recorded in the result, not returned, like Status: a member that cannot answer is a fact.
func (c *Client) HashKV(ctx context.Context, endpoint string, rev int64) KVHash {
	ctx, cancel := context.WithTimeout(ctx, HashKVTimeout)
	defer cancel()
	h := KVHash{Endpoint: endpoint}
	one, err := c.endpoint(endpoint)
	if err != nil {
		h.Err = err
		return h
	}
	// Over the member's cached connection, as Status: clientv3's Maintenance.HashKV dials anew.
	resp, err := etcdserverpb.NewMaintenanceClient(one.ActiveConnection()).HashKV(ctx, &etcdserverpb.HashKVRequest{Revision: rev})
	if err != nil {
		// As clientv3 would: etcd's typed error ("required revision has been compacted"), not the
		// gRPC status, so the summary a human reads is etcd's own words and callers can match it.
		h.Err = rpctypes.Error(err)
		return h
	}
	// The header carries the member's current revision, not the one hashed: HashRevision is that
	// (etcd 3.5.5+); an older member hashed exactly what was asked for.
	h.MemberID, h.Revision = resp.Header.MemberId, rev
	if resp.HashRevision != 0 {
		h.Revision = resp.HashRevision
	} else if rev == 0 {
		h.Revision = resp.Header.Revision
	}
	h.CompactRevision, h.Hash = resp.CompactRevision, resp.Hash
	return h
}

// HashKVs asks every given endpoint for its hash at rev, concurrently.
func (c *Client) HashKVs(ctx context.Context, endpoints []string, rev int64) []KVHash {
	out := make([]KVHash, len(endpoints))
	done := make(chan struct{})
	for i, ep := range endpoints {
		go func() {
			out[i] = c.HashKV(ctx, ep, rev)
			done <- struct{}{}
		}()
	}
	for range endpoints {
		<-done
	}
	return out
}
