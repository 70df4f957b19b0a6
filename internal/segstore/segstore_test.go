package segstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/etcd-steward/steward/internal/encryption"
	"github.com/etcd-steward/steward/internal/objstore"
	"github.com/etcd-steward/steward/internal/pitr"
	"github.com/etcd-steward/steward/internal/segment"
	"github.com/etcd-steward/steward/internal/snapshot"
)

const prefix = "ns/db"

var t0 = time.Date(2026, 12, 4, 14, 0, 0, 0, time.UTC)

func newStore(t *testing.T) objstore.Store {
	t.Helper()
	s, err := objstore.NewVolume(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newKeys(t *testing.T) *encryption.Keyring {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	k, err := encryption.ParseKeyring([]byte(id.String() + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// encode is a segment of cluster "cafe" with one put a revision, after+1..last, stamped a second each.
func encode(t *testing.T, cluster string, after, last int64) ([]byte, segment.Trailer) {
	t.Helper()
	var buf bytes.Buffer
	w, err := segment.NewWriter(&buf, segment.Header{ClusterID: cluster, After: after})
	if err != nil {
		t.Fatal(err)
	}
	for r := after + 1; r <= last; r++ {
		kv := &mvccpb.KeyValue{Key: []byte(fmt.Sprintf("/k/%d", r)), Value: []byte("v"), CreateRevision: r, ModRevision: r, Version: 1}
		if err := w.Revision(segment.Revision{Revision: r, Stamp: t0.Add(time.Duration(r) * time.Second),
			Events: []*mvccpb.Event{{Type: mvccpb.Event_PUT, Kv: kv}}}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), tr
}

func put(t *testing.T, s objstore.Store, cluster string, after, last int64, keys *encryption.Keyring) string {
	t.Helper()
	b, tr := encode(t, cluster, after, last)
	key, err := Put(context.Background(), s, prefix, b, tr, after, keys)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func putManifest(t *testing.T, s objstore.Store, backup string, rev int64) {
	t.Helper()
	b, _ := json.Marshal(snapshot.Manifest{FormatVersion: 1, Backup: backup, ClusterID: "cafe", Revision: rev,
		CompletedAt: t0.Add(time.Duration(rev) * time.Second)})
	if _, err := s.Put(context.Background(), prefix+"/"+backup+"/"+snapshot.ManifestName, bytes.NewReader(b), nil); err != nil {
		t.Fatal(err)
	}
}

func readChain(c *Chain) ([]int64, error) {
	var revs []int64
	for {
		rev, _, err := c.Next()
		if errors.Is(err, io.EOF) {
			return revs, nil
		}
		if err != nil {
			return revs, err
		}
		if rev != nil {
			revs = append(revs, rev.Revision)
		}
	}
}

func TestListPlanAndChain(t *testing.T) {
	for _, sealed := range []bool{false, true} {
		t.Run(fmt.Sprintf("sealed=%t", sealed), func(t *testing.T) {
			ctx := context.Background()
			s := newStore(t)
			var keys *encryption.Keyring
			if sealed {
				keys = newKeys(t)
			}
			putManifest(t, s, "b1", 10)
			put(t, s, "cafe", 10, 13, keys)
			put(t, s, "cafe", 13, 20, keys)
			put(t, s, "cafe", 20, 21, keys)
			// Not a base: a backup without its manifest, and an object of another kind.
			if _, err := s.Put(ctx, prefix+"/b2/snapshot.db.zst", strings.NewReader("x"), nil); err != nil {
				t.Fatal(err)
			}
			bases, segs, err := List(ctx, s, prefix)
			if err != nil {
				t.Fatal(err)
			}
			if len(bases) != 1 || bases[0].Name != "b1" || bases[0].Revision != 10 || len(segs) != 3 {
				t.Fatalf("List: bases %+v, %d segments", bases, len(segs))
			}
			if segs[1].After != 13 || segs[1].Last != 20 || !segs[1].LastStamp.Equal(t0.Add(20*time.Second)) {
				t.Errorf("segment %+v", segs[1])
			}
			if sealed && !strings.HasSuffix(segs[0].Key, ".seg.zst.age") || !sealed && !strings.HasSuffix(segs[0].Key, ".seg.zst") {
				t.Errorf("segment key %s", segs[0].Key)
			}
			plan, err := pitr.ForRevision(bases, segs, 18)
			if err != nil {
				t.Fatal(err)
			}
			c := NewChain(ctx, s, keys, plan)
			defer func() { _ = c.Close() }()
			revs, err := readChain(c)
			if err != nil {
				t.Fatal(err)
			}
			// The chain yields whole segments; replay stops at the plan's revision.
			if fmt.Sprint(revs) != "[11 12 13 14 15 16 17 18 19 20]" {
				t.Errorf("chain revisions %v", revs)
			}
			stamps, err := Stamps(ctx, s, segs[1].Key, keys)
			if err != nil || len(stamps) != 7 || stamps[0].Revision != 14 || !stamps[0].Time.Equal(t0.Add(14*time.Second)) {
				t.Errorf("Stamps = %v, %v", stamps, err)
			}
		})
	}
}

// A sealed segment is unreadable raw, refused without keys or under other keys, naming the key.
func TestSealedSegments(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	keys := newKeys(t)
	key := put(t, s, "cafe", 10, 12, keys)
	rc, info, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(rc)
	_ = rc.Close()
	if !encryption.Sealed(raw) || bytes.Contains(raw, []byte("/k/11")) || info.Metadata[MetaKeyID] != keys.KeyID() {
		t.Errorf("sealed object: starts %q, metadata %v", raw[:20], info.Metadata)
	}
	if _, _, err := Open(ctx, s, key, nil); err == nil || !strings.Contains(err.Error(), keys.KeyID()) {
		t.Errorf("without keys: %v, want an error naming %s", err, keys.KeyID())
	}
	if _, _, err := Open(ctx, s, key, newKeys(t)); !errors.Is(err, encryption.ErrNoKey) {
		t.Errorf("other keys: %v, want ErrNoKey", err)
	}
}

func TestChainRefuses(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	base := pitr.Base{Name: "b1", Revision: 10, ClusterID: "cafe"}
	good := put(t, s, "cafe", 10, 12, nil)
	other := put(t, s, "beef", 12, 14, nil)
	b, tr := encode(t, "cafe", 12, 16)
	cutKey := Dir(prefix) + segment.Name(12, 16, tr.LastStamp, EncodingZstd)
	if _, err := Put(ctx, s, prefix+"/x", b[:len(b)-10], tr, 12, nil); err != nil { // a cut segment, compressed
		t.Fatal(err)
	}
	objs, _ := s.List(ctx, prefix+"/x/")
	rc, _, _ := s.Get(ctx, objs[0].Key)
	cut, _ := io.ReadAll(rc)
	_ = rc.Close()
	if _, err := s.Put(ctx, cutKey, bytes.NewReader(cut), nil); err != nil {
		t.Fatal(err)
	}
	seg := func(key string) pitr.Segment {
		p, _ := segment.ParseName(key)
		return pitr.Segment{Key: key, After: p.After, Last: p.Last}
	}
	for _, tc := range []struct {
		name string
		plan pitr.Plan
		want string
	}{
		{"another cluster", pitr.Plan{Base: base, Segments: []pitr.Segment{seg(good), seg(other)}}, "a chain from another cluster"},
		{"a hole", pitr.Plan{Base: base, Segments: []pitr.Segment{seg(other)}}, "a hole"},
		{"a truncated segment", pitr.Plan{Base: base, Segments: []pitr.Segment{seg(good), seg(cutKey)}}, "truncated segment"},
		{"a name that lies about its end", pitr.Plan{Base: base, Segments: []pitr.Segment{{Key: good, After: 10, Last: 13}}}, "ends at revision 12, its name says 13"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChain(ctx, s, nil, tc.plan)
			defer func() { _ = c.Close() }()
			if _, err := readChain(c); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}
