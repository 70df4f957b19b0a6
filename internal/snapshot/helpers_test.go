package snapshot

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-steward/steward/internal/etcdtest"
	"github.com/etcd-steward/steward/internal/snapshot/snaptest"
)

func tctx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// startEtcd runs one real etcd member and returns a client dialled to exactly it.
func startEtcd(t testing.TB) (*etcdtest.Cluster, *clientv3.Client) {
	t.Helper()
	c := etcdtest.Start(t, 1)
	return c, clientFor(t, c.Members[0].ClientURL)
}

type cluster struct {
	*etcdtest.Cluster
	cli *clientv3.Client
}

// startCluster runs n members and a client for all of them.
func startCluster(t testing.TB, n int) cluster {
	t.Helper()
	c := etcdtest.Start(t, n)
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.ClientURLs(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cluster{c, cli}
}

// clientFor dials exactly one member, as Save wants, with its dial options.
func clientFor(t testing.TB, url string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), DialOptions: DialOptions()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// rawSnapshot reads a whole snapshot stream into memory (tests only: Save never does).
func rawSnapshot(t testing.TB, cli *clientv3.Client) []byte {
	t.Helper()
	rc, err := cli.Snapshot(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// liveRevision is the member's current revision (no writes may run concurrently).
func liveRevision(t testing.TB, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(tctx(t), "revision-probe")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// boltFacts opens a snapshot with bbolt, as `etcdutl snapshot status` does, and reports the
// last key of bucket "key" (etcdutl's revision), the meta bucket's compaction revisions, and
// whether the key bucket is inline or has overflow pages, so tests can show they cover those.
type boltFacts struct {
	keyRevision          int64
	finished, scheduled  int64
	storageVersion       string
	keyInline            bool
	keyOverflowPages     int
	keyLeafPages, pageSz int
}

func openBolt(t testing.TB, raw []byte) boltFacts {
	t.Helper()
	path := filepath.Join(t.TempDir(), "snapshot.db")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	var f boltFacts
	err = db.View(func(tx *bolt.Tx) error {
		kb := tx.Bucket([]byte("key"))
		if kb == nil {
			return fmt.Errorf("no key bucket")
		}
		if k, _ := kb.Cursor().Last(); k != nil {
			f.keyRevision, _, _ = revisionKey(k)
		}
		st := kb.Stats()
		f.keyInline, f.keyOverflowPages, f.keyLeafPages = kb.Root() == 0, st.LeafOverflowN, st.LeafPageN
		meta := tx.Bucket([]byte("meta"))
		f.finished, _ = compactRevision(meta.Get([]byte(finishedCompactKey)))
		f.scheduled, _ = compactRevision(meta.Get([]byte(scheduledCompactKey)))
		f.storageVersion = string(meta.Get([]byte(storageVersionKey)))
		f.pageSz = db.Info().PageSize
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// scanChunked feeds raw to a scanner in writes of the given sizes (cycled), as a gRPC stream
// would cut it anywhere.
func scanChunked(t testing.TB, raw []byte, sizes ...int) ScanResult {
	t.Helper()
	s := NewScanner()
	for i, off := 0, 0; off < len(raw); i++ {
		n := min(sizes[i%len(sizes)], len(raw)-off)
		if w, err := s.Write(raw[off : off+n]); w != n || err != nil {
			t.Fatalf("Write = %d, %v", w, err)
		}
		off += n
	}
	r, err := s.Result()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func fill(t testing.TB, cli *clientv3.Client, prefix string, n, size int) {
	t.Helper()
	snaptest.Fill(tctx(t), t, cli, prefix, n, size)
}

// serverMinor is the running etcd's minor version ("3.6"), so tests hold for any ETCD_BIN.
func serverMinor(t testing.TB, cli *clientv3.Client) (string, int) {
	t.Helper()
	st, err := cli.Status(tctx(t), cli.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	_, minor, ok := minorOf(st.Version)
	if !ok {
		t.Fatalf("etcd version %q", st.Version)
	}
	return fmt.Sprintf("3.%d", minor), minor
}
