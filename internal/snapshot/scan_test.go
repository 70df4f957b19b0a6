package snapshot

import (
	"fmt"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// compareScan compares the scanner with bbolt and with the live member: the revision etcd serves
// now is the one the scanner must find, and the highest key of bucket "key" (what etcdutl
// reports) must be what it saw as KeyRevision whenever no compaction removed the newest ones.
func compareScan(t *testing.T, raw []byte, live int64, sizes ...int) (ScanResult, boltFacts) {
	t.Helper()
	f := openBolt(t, raw)
	r := scanChunked(t, raw, sizes...)
	if r.Revision != live {
		t.Errorf("scanner revision %d, etcd serves %d", r.Revision, live)
	}
	if r.CompactRevision != f.finished || r.ScheduledCompactRevision != f.scheduled || r.StorageVersion != f.storageVersion {
		t.Errorf("scanner meta (finished %d, scheduled %d, storage %q), bbolt (%d, %d, %q)",
			r.CompactRevision, r.ScheduledCompactRevision, r.StorageVersion, f.finished, f.scheduled, f.storageVersion)
	}
	if !r.HasHash || r.RawSize != int64(len(raw)) || r.DBSize != int64(len(raw))-32 {
		t.Errorf("hash %v, sizes %d/%d of %d", r.HasHash, r.DBSize, r.RawSize, len(raw))
	}
	return r, f
}

func TestScanTinyDatabaseWithInlineBuckets(t *testing.T) {
	_, cli := startEtcd(t)
	for i := range 3 {
		if _, err := cli.Put(tctx(t), fmt.Sprintf("k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	raw := rawSnapshot(t, cli)
	live := liveRevision(t, cli)
	// Byte by byte and in odd sizes: page boundaries and headers split across writes.
	r, f := compareScan(t, raw, live, 1, 7, 13, 4096, 100)
	if !f.keyInline {
		t.Fatal("the key bucket is not inline: this test no longer covers inline buckets")
	}
	if r.KeyRevision != f.keyRevision || f.keyRevision != live {
		t.Errorf("key revision: scanner %d, bbolt %d, live %d", r.KeyRevision, f.keyRevision, live)
	}
}

func TestScanManyKeysAndOverflowPages(t *testing.T) {
	_, cli := startEtcd(t)
	fill(t, cli, "small", 3000, 100)
	fill(t, cli, "large", 40, 20_000) // each value spans several pages
	fill(t, cli, "small", 200, 120)   // rewrite some: history and freed pages
	raw := rawSnapshot(t, cli)
	live := liveRevision(t, cli)
	r, f := compareScan(t, raw, live, 32*1024, 5000, 4095)
	if f.keyOverflowPages == 0 || f.keyLeafPages < 20 {
		t.Fatalf("key bucket has %d leaf and %d overflow pages: this test no longer covers overflow", f.keyLeafPages, f.keyOverflowPages)
	}
	if r.KeyRevision != f.keyRevision || r.Revision != f.keyRevision {
		t.Errorf("scanner %d/%d, bbolt (etcdutl) %d", r.KeyRevision, r.Revision, f.keyRevision)
	}
}

// After deletions and a compaction at the last revision (a tombstone), the scanner still finds
// the revision etcd serves, and reads the compaction from the meta bucket. (etcd keeps the
// tombstone at the compaction revision itself; a database whose newest revisions are all gone is
// built by hand in TestScanTakesTheCompactionRevisionWhenItIsHigher.)
func TestScanAfterDeletesAndCompaction(t *testing.T) {
	ctx := tctx(t)
	_, cli := startEtcd(t)
	fill(t, cli, "a", 500, 300)
	if _, err := cli.Delete(ctx, "a/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	fill(t, cli, "b", 50, 100)
	for i := range 20 {
		if _, err := cli.Delete(ctx, fmt.Sprintf("b/%06d", i)); err != nil {
			t.Fatal(err)
		}
	}
	live := liveRevision(t, cli)
	if _, err := cli.Compact(ctx, live, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	raw := rawSnapshot(t, cli)
	r, f := compareScan(t, raw, live, 16*1024)
	if f.finished != live || r.KeyRevision != f.keyRevision {
		t.Errorf("bbolt: finished compaction %d, last key %d; scanner %+v; live %d", f.finished, f.keyRevision, r, live)
	}
}

func TestScanRefusesBrokenStreams(t *testing.T) {
	_, cli := startEtcd(t)
	fill(t, cli, "k", 200, 200)
	raw := rawSnapshot(t, cli)
	for name, tc := range map[string]struct {
		b    []byte
		want string
	}{
		"flipped byte": {flip(raw, len(raw)/2), "sha256 of the database does not match"},
		"truncated":    {raw[:len(raw)-4096-32], "snapshot stream ended after"},
		"no hash tail": {raw[:len(raw)-5], "bytes after the database"},
		"not bbolt":    {[]byte(strings.Repeat("not a database ", 100)), "not a bbolt meta page"},
		"empty":        {nil, "before its first page"},
	} {
		s := NewScanner()
		_, _ = s.Write(tc.b)
		if _, err := s.Result(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	// Without the trailing hash (a database file copied from a data dir) the scan works and says so.
	s := NewScanner()
	_, _ = s.Write(raw[:len(raw)-32])
	if r, err := s.Result(); err != nil || r.HasHash {
		t.Errorf("database without hash: %+v, %v", r, err)
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0xff
	return c
}
