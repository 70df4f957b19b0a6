package snapshot

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/authpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// Databases etcd does not produce on demand, built with bbolt itself in etcd's layout.

func revBytes(main int64, tombstone bool) []byte {
	b := make([]byte, 17, 18)
	binary.BigEndian.PutUint64(b, uint64(main))
	b[8] = '_'
	if tombstone {
		b = append(b, 't')
	}
	return b
}

func kvBytes(t *testing.T, key string, rev int64, value []byte) []byte {
	t.Helper()
	b, err := proto.Marshal(&mvccpb.KeyValue{Key: []byte(key), CreateRevision: rev, ModRevision: rev, Version: 1, Value: value})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// buildBolt writes a bbolt file with the given buckets and returns it as etcd streams it
// (tx.WriteTo: exactly the pages in use), without etcd's trailing hash.
func buildBolt(t *testing.T, fill func(tx *bolt.Tx) error) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fill); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	var buf bytes.Buffer
	if err := db.View(func(tx *bolt.Tx) error { _, err := tx.WriteTo(&buf); return err }); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func bucket(t *testing.T, tx *bolt.Tx, name string) *bolt.Bucket {
	t.Helper()
	b, err := tx.CreateBucketIfNotExists([]byte(name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// When compaction removed the newest revisions, etcd serves the compaction revision, and so
// must the scanner. A user whose name has the shape of a revision key (its first 8 bytes would be
// a huge revision) is not mistaken for one.
func TestScanTakesTheCompactionRevisionWhenItIsHigher(t *testing.T) {
	raw := buildBolt(t, func(tx *bolt.Tx) error {
		kb := bucket(t, tx, "key")
		for rev := int64(1); rev <= 100; rev++ {
			if err := kb.Put(revBytes(rev, false), kvBytes(t, "k", rev, []byte("v"))); err != nil {
				return err
			}
		}
		meta := bucket(t, tx, "meta")
		_ = meta.Put([]byte(finishedCompactKey), revBytes(150, false))
		_ = meta.Put([]byte(scheduledCompactKey), revBytes(150, false))
		_ = meta.Put([]byte(storageVersionKey), []byte("3.6.0"))
		// Enough users that their bucket has a page of its own (an inline bucket is attributed).
		users := bucket(t, tx, "authUsers")
		for i := range 60 {
			name := fmt.Appendf(nil, "user%04d_server%02d", i, i)
			user, _ := proto.Marshal(&authpb.User{Name: name, Password: []byte("$2a$10$hash-of-the-password")})
			if err := users.Put(name, user); err != nil {
				return err
			}
		}
		return nil
	})
	r := scanChunked(t, raw, 4096)
	if r.Revision != 150 || r.KeyRevision != 100 || r.CompactRevision != 150 || r.StorageVersion != "3.6.0" || r.HasHash {
		t.Errorf("scan = %+v; want revision 150 (the compaction), key revision 100, storage 3.6.0, no hash", r)
	}
}

// bbolt never splits a leaf of four elements or fewer, so a key can sit after another key's
// value of many pages, inside one page with a long overflow: the scanner reads past the value
// without keeping it.
func TestScanKeyAfterAHugeValueInTheSamePage(t *testing.T) {
	raw := buildBolt(t, func(tx *bolt.Tx) error {
		kb := bucket(t, tx, "key")
		_ = kb.Put(revBytes(1, false), kvBytes(t, "a", 1, []byte("small")))
		_ = kb.Put(revBytes(2, false), kvBytes(t, "b", 2, make([]byte, 300_000)))
		_ = kb.Put(revBytes(3, false), kvBytes(t, "c", 3, []byte("after the big one")))
		_ = bucket(t, tx, "meta").Put([]byte("consistent_index"), make([]byte, 8))
		return nil
	})
	f := openBolt(t, raw)
	if f.keyLeafPages != 1 || f.keyOverflowPages < 70 {
		t.Fatalf("key bucket: %d leaf pages, %d overflow: not the layout this test is about", f.keyLeafPages, f.keyOverflowPages)
	}
	if r := scanChunked(t, raw, 1000, 32*1024); r.Revision != 3 || r.KeyRevision != 3 {
		t.Errorf("scan = %+v, want revision 3", r)
	}
}

// bbolt's Tx.WriteTo copies the whole file, free pages included, while etcd's writes go on: a
// page free in the snapshot's transaction can be reused by a later write before the copy reaches
// it, and then carries revisions the snapshot does not hold. Only pages reachable from bucket
// "key" count (the revision recorded was 219 while the data ended at 216, under traffic).
func TestScanIgnoresFreePagesReusedByLaterWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	put := func(from, to int64) func(tx *bolt.Tx) error {
		return func(tx *bolt.Tx) error {
			kb := bucket(t, tx, "key")
			for rev := from; rev <= to; rev++ {
				if err := kb.Put(revBytes(rev, false), kvBytes(t, fmt.Sprintf("k%d", rev), rev, make([]byte, 500))); err != nil {
					return err
				}
			}
			return nil
		}
	}
	steps := []func(tx *bolt.Tx) error{
		put(1, 300),
		func(tx *bolt.Tx) error { // a compaction at 250: many key pages freed
			kb := bucket(t, tx, "key")
			for rev := int64(1); rev < 250; rev++ {
				if err := kb.Delete(revBytes(rev, false)); err != nil {
					return err
				}
			}
			m := bucket(t, tx, "meta")
			_ = m.Put([]byte(scheduledCompactKey), revBytes(250, false))
			return m.Put([]byte(finishedCompactKey), revBytes(250, false))
		},
		// One more commit, so the pages freed above are released to writers once only the
		// snapshot's reader (at this transaction) is open.
		func(tx *bolt.Tx) error { return bucket(t, tx, "meta").Put([]byte("consistent_index"), make([]byte, 8)) },
	}
	for _, step := range steps {
		if err := db.Update(step); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(put(301, 400)); err != nil { // etcd's traffic while the snapshot streams
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := snap.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	_ = snap.Rollback()
	raw := buf.Bytes()
	if strings.Count(string(raw), string(revBytes(399, false))) == 0 {
		t.Fatal("no later revision reached the copy's free pages: not the layout this test is about")
	}
	f := openBolt(t, raw)
	if f.keyRevision != 300 {
		t.Fatalf("bbolt reads key revision %d from the snapshot, want 300", f.keyRevision)
	}
	if r := scanChunked(t, raw, 4096); r.Revision != 300 || r.KeyRevision != 300 {
		t.Errorf("scan = %+v, want revision 300: what the snapshot's transaction saw", r)
	}
}
