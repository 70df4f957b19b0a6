package segstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/etcd-steward/steward/internal/encryption"
	"github.com/etcd-steward/steward/internal/objstore"
	"github.com/etcd-steward/steward/internal/pitr"
	"github.com/etcd-steward/steward/internal/segment"
)

// Chain reads a plan's segments one after the other as one stream of revisions (replay.Source).
// It opens each segment only when the last is read to its end, and checks that every segment
// belongs to the base's cluster and continues exactly where the last ended.
type Chain struct {
	ctx       context.Context
	store     objstore.Store
	keys      *encryption.Keyring
	clusterID string
	segs      []pitr.Segment
	next      int
	cur       *segment.Reader
	closer    io.Closer
	last      int64
}

// NewChain reads plan's segments; the caller closes the chain.
func NewChain(ctx context.Context, store objstore.Store, keys *encryption.Keyring, plan pitr.Plan) *Chain {
	return &Chain{ctx: ctx, store: store, keys: keys, clusterID: plan.Base.ClusterID, segs: plan.Segments, last: plan.Base.Revision}
}

// Next returns the next revision or lease of the chain, io.EOF after the last segment.
func (c *Chain) Next() (*segment.Revision, *segment.Lease, error) {
	for {
		if c.cur == nil {
			if c.next == len(c.segs) {
				return nil, nil, io.EOF
			}
			if err := c.open(c.segs[c.next]); err != nil {
				return nil, nil, err
			}
		}
		rev, l, err := c.cur.Next()
		if errors.Is(err, io.EOF) {
			s := c.segs[c.next]
			if c.last != s.Last {
				return nil, nil, fmt.Errorf("segment %s ends at revision %d, its name says %d", c.store.Location(s.Key), c.last, s.Last)
			}
			_ = c.closer.Close()
			c.cur, c.closer = nil, nil
			c.next++
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("segment %s: %w", c.store.Location(c.segs[c.next].Key), err)
		}
		if rev != nil {
			c.last = rev.Revision
		}
		return rev, l, nil
	}
}

func (c *Chain) open(s pitr.Segment) error {
	if s.After != c.last {
		return fmt.Errorf("segment %s continues from revision %d, the chain is at %d: a hole", c.store.Location(s.Key), s.After, c.last)
	}
	r, closer, err := Open(c.ctx, c.store, s.Key, c.keys)
	if err != nil {
		return err
	}
	if id := r.Header().ClusterID; c.clusterID != "" && !sameClusterID(id, c.clusterID) {
		_ = closer.Close()
		return fmt.Errorf("segment %s is of cluster %s, the base snapshot of cluster %s: a chain from another cluster", c.store.Location(s.Key), id, c.clusterID)
	}
	c.cur, c.closer = r, closer
	return nil
}

// Close closes the open segment, if any.
func (c *Chain) Close() error {
	if c.closer != nil {
		return c.closer.Close()
	}
	return nil
}

// sameClusterID compares hex IDs as etcdctl and Steward print them (with or without 0x, padding).
func sameClusterID(a, b string) bool {
	norm := func(s string) string {
		return strings.TrimLeft(strings.TrimPrefix(strings.ToLower(s), "0x"), "0")
	}
	return norm(a) == norm(b)
}

// Stamps reads one segment's revisions and stamps, for pitr.Refine.
func Stamps(ctx context.Context, store objstore.Store, key string, keys *encryption.Keyring) ([]pitr.Stamp, error) {
	r, closer, err := Open(ctx, store, key, keys)
	if err != nil {
		return nil, err
	}
	defer func() { _ = closer.Close() }()
	var out []pitr.Stamp
	for {
		rev, _, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("segment %s: %w", store.Location(key), err)
		}
		if rev != nil {
			out = append(out, pitr.Stamp{Revision: rev.Revision, Time: rev.Stamp})
		}
	}
}
