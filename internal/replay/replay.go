// Package replay rebuilds an etcd database at a chosen revision offline: a base snapshot's bbolt
// file, then a continuous backup's revisions written into it one transaction each with etcd's own
// storage code (go.etcd.io/etcd/server/v3 storage/mvcc and lease), never through a live etcd.
//
// Why offline, and why etcd's packages: a live etcd's lessor expires leases while a replay runs
// (gardener's delta restore lost keys that way), its --max-txn-ops caps what one transaction
// carries, and its revisions are its own. Here the mvcc store gives each replayed transaction the
// next revision, exactly as the source did, so create revisions, mod revisions and versions come
// out the same, and every one is checked against what the source recorded: a chain that is not
// this database's history (another cluster's, a hole, a reordering) stops the replay at the first
// difference. The lessor is never promoted, so it revokes nothing; leases a put names are granted
// with the TTL the streamer recorded before the put.
//
// The result is still a snapshot file for `etcdutl snapshot restore` of the target version (the
// bbolt file with etcd's sha256 of it appended), so the rest of a restore is today's: new cluster
// ID and membership, --bump-revision, --mark-compacted.
package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/pkg/v3/traceutil"
	"go.etcd.io/etcd/server/v3/lease"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap"

	"github.com/etcd-steward/steward/internal/segment"
)

// Source yields revisions and leases in order (segment.Reader's Next, across a chain's segments),
// io.EOF at the end.
type Source interface {
	Next() (*segment.Revision, *segment.Lease, error)
}

// DefaultLeaseTTL is granted to a lease a put names whose TTL was never recorded (it had expired
// before the streamer could ask): the key it holds is deleted by a later revision of the source.
const DefaultLeaseTTL = 60

// Options of a replay.
type Options struct {
	// To is the last revision applied; 0 applies every revision the source has.
	To     int64
	Logger *zap.Logger
}

// Result says what a replay did.
type Result struct {
	// From is the base's revision; To the last applied (From when none was).
	From, To          int64
	Revisions, Events int
	// LeasesGranted were granted for puts; LeasesUnknownTTL of them with DefaultLeaseTTL.
	LeasesGranted, LeasesUnknownTTL int
}

// Apply replays src onto the bbolt database at dbPath (a plain bbolt file: see Snapshot for etcd's
// snapshot stream) up to opts.To. On an error the file is left half-replayed: callers replay into
// a copy they can throw away.
func Apply(ctx context.Context, dbPath string, src Source, opts Options) (res Result, err error) {
	lg := opts.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	be := backend.NewDefaultBackend(lg, dbPath)
	defer func() { err = errors.Join(err, be.Close()) }()
	lessor := lease.NewLessor(lg, be, nil, lease.LessorConfig{MinLeaseTTL: 1})
	defer lessor.Stop()
	store := mvcc.NewStore(lg, be, lessor, mvcc.StoreConfig{})
	defer func() { err = errors.Join(err, store.Close()) }()

	res.From = store.Rev()
	res.To = res.From
	ttls := map[int64]int64{}
	for ctx.Err() == nil {
		rev, l, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return res, err
		}
		if l != nil {
			ttls[l.ID] = l.TTL
			continue
		}
		if opts.To > 0 && rev.Revision > opts.To {
			break
		}
		if rev.Revision != res.To+1 {
			return res, fmt.Errorf("revision %d follows %d: the chain has a hole or is not this database's", rev.Revision, res.To)
		}
		if err := grantLeases(lessor, rev, ttls, &res); err != nil {
			return res, err
		}
		if err := applyRevision(ctx, store, rev); err != nil {
			return res, err
		}
		res.To = rev.Revision
		res.Revisions++
		res.Events += len(rev.Events)
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if opts.To > 0 && res.To < opts.To {
		return res, fmt.Errorf("the chain ends at revision %d, before %d", res.To, opts.To)
	}
	return res, nil
}

func grantLeases(lessor lease.Lessor, rev *segment.Revision, ttls map[int64]int64, res *Result) error {
	for _, e := range rev.Events {
		id := e.GetKv().GetLease()
		if e.GetType() != mvccpb.Event_PUT || id == 0 || lessor.Lookup(lease.LeaseID(id)) != nil {
			continue
		}
		ttl, ok := ttls[id]
		if !ok || ttl <= 0 {
			ttl = DefaultLeaseTTL
			res.LeasesUnknownTTL++
		}
		if _, err := lessor.Grant(lease.LeaseID(id), ttl); err != nil {
			return fmt.Errorf("revision %d: granting lease %x: %w", rev.Revision, id, err)
		}
		res.LeasesGranted++
	}
	return nil
}

// applyRevision writes one revision as one transaction and checks each key came out as the source
// recorded it.
func applyRevision(ctx context.Context, store mvcc.KV, rev *segment.Revision) error {
	txn := store.Write(traceutil.TODO())
	defer txn.End()
	for i, e := range rev.Events {
		kv := e.GetKv()
		var got int64
		switch e.GetType() {
		case mvccpb.Event_PUT:
			got = txn.Put(kv.GetKey(), kv.GetValue(), lease.LeaseID(kv.GetLease()))
			r, err := txn.Range(ctx, kv.GetKey(), nil, mvcc.RangeOptions{Rev: got})
			if err != nil {
				return fmt.Errorf("revision %d: reading back %q: %w", rev.Revision, kv.GetKey(), err)
			}
			if len(r.KVs) != 1 || !sameKV(r.KVs[0], kv) {
				return fmt.Errorf("revision %d, event %d: %q came out as %v, the source recorded %v: the chain is not this database's history",
					rev.Revision, i, kv.GetKey(), describe(r.KVs), describe([]*mvccpb.KeyValue{kv}))
			}
		case mvccpb.Event_DELETE:
			var n int64
			n, got = txn.DeleteRange(kv.GetKey(), nil)
			if n != 1 {
				return fmt.Errorf("revision %d, event %d: deleting %q deleted %d keys, the source deleted one: the chain is not this database's history",
					rev.Revision, i, kv.GetKey(), n)
			}
		default:
			return fmt.Errorf("revision %d, event %d: unknown event type %v", rev.Revision, i, e.GetType())
		}
		if got != rev.Revision {
			return fmt.Errorf("revision %d replayed as revision %d: the chain is not this database's history", rev.Revision, got)
		}
	}
	return nil
}

func sameKV(a, b *mvccpb.KeyValue) bool {
	return bytes.Equal(a.GetKey(), b.GetKey()) && bytes.Equal(a.GetValue(), b.GetValue()) &&
		a.GetCreateRevision() == b.GetCreateRevision() && a.GetModRevision() == b.GetModRevision() &&
		a.GetVersion() == b.GetVersion() && a.GetLease() == b.GetLease()
}

func describe(kvs []*mvccpb.KeyValue) string {
	if len(kvs) == 0 {
		return "nothing"
	}
	kv := kvs[0]
	return fmt.Sprintf("{create %d, mod %d, version %d, lease %x, %d value bytes}",
		kv.GetCreateRevision(), kv.GetModRevision(), kv.GetVersion(), kv.GetLease(), len(kv.GetValue()))
}
