package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/pkg/v3/traceutil"
	"go.etcd.io/etcd/server/v3/lease"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap"

	"github.com/etcd-steward/steward/internal/etcdtest"
	"github.com/etcd-steward/steward/internal/segment"
	"github.com/etcd-steward/steward/internal/streamer"
)

// recording is what a test recorded of a real etcd: a snapshot file at base, and the segment of
// every revision after it, written and read back through the segment format.
type recording struct {
	cli      *clientv3.Client
	snapshot string
	base     int64
	segment  []byte
	last     int64
}

// record runs traffic on a real etcd, snapshots it, records the revisions after the snapshot with
// the streamer's own grouping, and runs more traffic.
func record(t *testing.T, ops int) *recording {
	t.Helper()
	c := etcdtest.Start(t, 1)
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.ClientURLs(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(1, 2))
	traffic(ctx, t, cli, rng, ops/4)

	rec := &recording{cli: cli, snapshot: filepath.Join(t.TempDir(), "base.db")}
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(rec.snapshot)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, rc); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	resp, err := cli.Get(ctx, "any")
	if err != nil {
		t.Fatal(err)
	}
	rec.base = resp.Header.Revision // no writes since the snapshot

	var buf bytes.Buffer
	w, err := segment.NewWriter(&buf, segment.Header{ClusterID: fmt.Sprintf("%x", resp.Header.ClusterId), After: rec.base})
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	wch := cli.Watch(clientv3.WithRequireLeader(wctx), "", clientv3.WithFromKey(), clientv3.WithRev(rec.base+1))
	traffic(ctx, t, cli, rng, ops)
	end, err := cli.Get(ctx, "any")
	if err != nil {
		t.Fatal(err)
	}
	leases := map[int64]bool{}
	for wr := range wch {
		if err := wr.Err(); err != nil {
			t.Fatal(err)
		}
		revs, err := streamer.Revisions(wr.Events, wr.Header.Revision, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range revs {
			for _, e := range r.Events {
				if id := e.GetKv().GetLease(); id != 0 && !leases[id] {
					leases[id] = true
					ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(id))
					if err != nil {
						t.Fatal(err)
					}
					if err := w.Lease(segment.Lease{ID: id, TTL: ttl.GrantedTTL}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := w.Revision(r); err != nil {
				t.Fatal(err)
			}
		}
		if w.Last() >= end.Header.Revision {
			break
		}
	}
	wcancel()
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rec.segment, rec.last = buf.Bytes(), w.Last()
	t.Logf("base %d, recorded %d revisions to %d in %d bytes", rec.base, w.Revisions(), rec.last, len(rec.segment))
	return rec
}

// traffic mixes puts, overwrites, deletes, multi-key transactions, leased puts and lease
// revocations (which delete every key of the lease in one revision), and re-creates deleted keys.
func traffic(ctx context.Context, t *testing.T, cli *clientv3.Client, rng *rand.Rand, n int) {
	t.Helper()
	key := func() string { return fmt.Sprintf("/k/%02d", rng.IntN(40)) }
	var leases []clientv3.LeaseID
	for i := range n {
		var err error
		switch op := rng.IntN(10); {
		case op < 4:
			_, err = cli.Put(ctx, key(), fmt.Sprintf("v%d", i))
		case op < 5:
			_, err = cli.Delete(ctx, key())
		case op < 7:
			_, err = cli.Txn(ctx).Then(clientv3.OpPut(key(), fmt.Sprintf("t%d", i)), clientv3.OpDelete(key()),
				clientv3.OpPut(fmt.Sprintf("/t/%d", i), strings.Repeat("x", rng.IntN(100)))).Commit()
		case op < 8:
			var l *clientv3.LeaseGrantResponse
			if l, err = cli.Grant(ctx, int64(30+rng.IntN(60))); err == nil {
				leases = append(leases, l.ID)
				_, err = cli.Put(ctx, fmt.Sprintf("/l/%d/a", i), "leased", clientv3.WithLease(l.ID))
				if err == nil {
					_, err = cli.Put(ctx, fmt.Sprintf("/l/%d/b", i), "leased", clientv3.WithLease(l.ID))
				}
			}
		case op < 9 && len(leases) > 0:
			j := rng.IntN(len(leases))
			_, err = cli.Revoke(ctx, leases[j])
			leases = append(leases[:j], leases[j+1:]...)
		default:
			_, err = cli.Put(ctx, key(), "", clientv3.WithIgnoreValue())
			if err != nil && strings.Contains(err.Error(), "key not found") {
				err = nil // WithIgnoreValue on a deleted key: no revision, as intended
			}
		}
		if err != nil {
			t.Fatalf("traffic op %d: %v", i, err)
		}
	}
}

func (r *recording) source(t *testing.T) Source {
	t.Helper()
	sr, err := segment.NewReader(bytes.NewReader(r.segment))
	if err != nil {
		t.Fatal(err)
	}
	return sr
}

// copyOf copies the base snapshot for one replay.
func (r *recording) copyOf(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(r.snapshot)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "replay.db")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The replayed database at R holds what the source served at R: every key, value, create and mod
// revision, version and lease, read from the source with WithRev(R).
func TestReplayMatchesTheSource(t *testing.T) {
	rec := record(t, 400)
	ctx := context.Background()
	for _, to := range []int64{rec.base, rec.base + 1, (rec.base + rec.last) / 2, rec.last - 1, rec.last} {
		t.Run(fmt.Sprint(to-rec.base), func(t *testing.T) {
			p := rec.copyOf(t)
			res, err := Snapshot(ctx, p, rec.source(t), Options{To: to})
			if err != nil {
				t.Fatal(err)
			}
			if res.From != rec.base || res.To != to || res.Revisions != int(to-rec.base) {
				t.Errorf("result %+v, want from %d to %d", res, rec.base, to)
			}
			live, err := rec.cli.Get(ctx, "", clientv3.WithFromKey(), clientv3.WithRev(to))
			if err != nil {
				t.Fatal(err)
			}
			got, rev, leases := readDB(t, p)
			if rev != to {
				t.Errorf("replayed database at revision %d, want %d", rev, to)
			}
			if len(got) != len(live.Kvs) {
				t.Fatalf("%d keys replayed, the source had %d at %d", len(got), len(live.Kvs), to)
			}
			for i, kv := range live.Kvs {
				if !sameKV(got[i], kv) {
					t.Errorf("key %q: replayed %v, source %v", kv.Key, got[i], kv)
				}
				if kv.Lease != 0 && !leases[kv.Lease] {
					t.Errorf("key %q holds lease %x, which the replayed database does not have", kv.Key, kv.Lease)
				}
			}
		})
	}
}

// readDB opens a replayed snapshot file as etcd would (after its hash) and reads every key.
func readDB(t *testing.T, snapshotPath string) ([]*mvccpb.KeyValue, int64, map[int64]bool) {
	t.Helper()
	p := rec2db(t, snapshotPath)
	be := backend.NewDefaultBackend(zap.NewNop(), p)
	defer func() { _ = be.Close() }()
	lessor := lease.NewLessor(zap.NewNop(), be, nil, lease.LessorConfig{MinLeaseTTL: 1})
	defer lessor.Stop()
	s := mvcc.NewStore(zap.NewNop(), be, lessor, mvcc.StoreConfig{})
	defer func() { _ = s.Close() }()
	txn := s.Read(mvcc.ConcurrentReadTxMode, traceutil.TODO())
	defer txn.End()
	r, err := txn.Range(context.Background(), []byte{0}, []byte{}, mvcc.RangeOptions{}) // an empty end: every key from the first
	if err != nil {
		t.Fatal(err)
	}
	leases := map[int64]bool{}
	for _, l := range lessor.Leases() {
		leases[int64(l.ID)] = true
	}
	return r.KVs, r.Rev, leases
}

// rec2db checks a snapshot file's hash (etcdutl's check) and copies its database out.
func rec2db(t *testing.T, snapshotPath string) string {
	t.Helper()
	b, err := os.ReadFile(snapshotPath)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "check.db")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := stripHash(p); err != nil {
		t.Fatalf("the replayed snapshot's hash: %v", err)
	}
	return p
}

// sliceSource replays revisions held in memory, altered by a test.
type sliceSource struct {
	revs []*segment.Revision
	i    int
}

func (s *sliceSource) Next() (*segment.Revision, *segment.Lease, error) {
	if s.i == len(s.revs) {
		return nil, nil, io.EOF
	}
	s.i++
	return s.revs[s.i-1], nil, nil
}

func (r *recording) revisions(t *testing.T) []*segment.Revision {
	t.Helper()
	src := r.source(t)
	var out []*segment.Revision
	for {
		rev, _, err := src.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if rev != nil {
			out = append(out, rev)
		}
	}
}

// A chain that is not the base's history stops the replay at the first difference, with a reason.
func TestReplayRefuses(t *testing.T) {
	rec := record(t, 120)
	ctx := context.Background()
	firstPut := func(revs []*segment.Revision) *mvccpb.KeyValue {
		for _, r := range revs {
			for _, e := range r.Events {
				if e.Type == mvccpb.Event_PUT && e.Kv.Version > 1 {
					return e.Kv
				}
			}
		}
		t.Fatal("no overwrite in the recording")
		return nil
	}
	firstDelete := func(revs []*segment.Revision) *mvccpb.KeyValue {
		for _, r := range revs {
			for _, e := range r.Events {
				if e.Type == mvccpb.Event_DELETE {
					return e.Kv
				}
			}
		}
		t.Fatal("no delete in the recording")
		return nil
	}
	for _, tc := range []struct {
		name  string
		alter func([]*segment.Revision) []*segment.Revision
		to    int64
		want  string
	}{
		{name: "a hole", alter: func(r []*segment.Revision) []*segment.Revision { return append(r[:5:5], r[6:]...) },
			want: "has a hole"},
		{name: "a create revision of another history", alter: func(r []*segment.Revision) []*segment.Revision {
			firstPut(r).CreateRevision--
			return r
		}, want: "not this database's history"},
		{name: "a version of another history", alter: func(r []*segment.Revision) []*segment.Revision {
			firstPut(r).Version++
			return r
		}, want: "not this database's history"},
		{name: "a delete of a key that is not there", alter: func(r []*segment.Revision) []*segment.Revision {
			kv := firstDelete(r)
			kv.Key = append([]byte("/absent"), kv.Key...)
			return r
		}, want: "deleted 0 keys"},
		{name: "a chain that starts elsewhere", alter: func(r []*segment.Revision) []*segment.Revision { return r[1:] },
			want: "has a hole"},
		{name: "a target past the chain's end", alter: func(r []*segment.Revision) []*segment.Revision { return r },
			to: rec.last + 1, want: fmt.Sprintf("the chain ends at revision %d, before %d", rec.last, rec.last+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &sliceSource{revs: tc.alter(rec.revisions(t))}
			_, err := Snapshot(ctx, rec.copyOf(t), src, Options{To: tc.to})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	t.Run("a damaged snapshot", func(t *testing.T) {
		p := rec.copyOf(t)
		b, _ := os.ReadFile(p)
		b[len(b)/2] ^= 1
		_ = os.WriteFile(p, b, 0o600)
		if _, err := Snapshot(ctx, p, rec.source(t), Options{}); err == nil || !strings.Contains(err.Error(), "damaged") {
			t.Errorf("error %v, want the hash refused", err)
		}
	})
}
