package datacheck

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// walBuilder writes WAL files as etcd frames them: an 8-byte little-endian length whose top byte
// flags padding, then a walpb.Record padded to 8 bytes.
type walBuilder struct{ b []byte }

func (w *walBuilder) record(typ int64, data []byte) {
	var rec []byte
	rec = protowire.AppendTag(rec, recType, protowire.VarintType)
	rec = protowire.AppendVarint(rec, uint64(typ))
	rec = protowire.AppendTag(rec, recData, protowire.BytesType)
	rec = protowire.AppendBytes(rec, data)
	pad := (8 - len(rec)%8) % 8
	lenField := uint64(len(rec))
	if pad != 0 {
		lenField |= uint64(0x80|pad) << 56
	}
	w.b = binary.LittleEndian.AppendUint64(w.b, lenField)
	w.b = append(w.b, rec...)
	w.b = append(w.b, make([]byte, pad)...)
}

func (w *walBuilder) metadata(id uint64) {
	var m []byte
	m = protowire.AppendTag(m, metaNodeID, protowire.VarintType)
	w.record(metadataType, protowire.AppendVarint(m, id))
}

func (w *walBuilder) entry(index uint64, data []byte) {
	var e []byte
	e = protowire.AppendTag(e, 2, protowire.VarintType) // term
	e = protowire.AppendVarint(e, 2)
	e = protowire.AppendTag(e, entryIndex, protowire.VarintType)
	e = protowire.AppendVarint(e, index)
	e = protowire.AppendTag(e, entryData, protowire.BytesType)
	w.record(entryType, protowire.AppendBytes(e, data))
}

func (w *walBuilder) snapshot(index uint64) {
	var s []byte
	s = protowire.AppendTag(s, snapIndex, protowire.VarintType)
	w.record(snapshotType, protowire.AppendVarint(s, index))
}

func (w *walBuilder) write(t *testing.T, dir, name string) {
	t.Helper()
	walDir := filepath.Join(dir, "member", "wal")
	if err := os.MkdirAll(walDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// etcd preallocates a WAL file: zeros follow the last record.
	if err := os.WriteFile(filepath.Join(walDir, name), append(w.b, make([]byte, 64)...), 0o600); err != nil {
		t.Fatal(err)
	}
}

// v2Request is what etcd 3.5 proposes to set the cluster version: a v2 pb.Request (ID, method,
// path, value), not an InternalRaftRequest.
func v2Request() []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 0x1234)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, "PUT")
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendString(b, "/0/version")
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	return protowire.AppendString(b, "3.5.0")
}

func v3Request(t *testing.T) []byte {
	t.Helper()
	b, err := proto.Marshal(&pb.InternalRaftRequest{Header: &pb.RequestHeader{ID: 7}, Put: &pb.PutRequest{Key: []byte("k")}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestV2RequestIsNoInternalRaftRequest(t *testing.T) {
	if err := proto.Unmarshal(v2Request(), &pb.InternalRaftRequest{}); err == nil {
		t.Fatal("the v2 request parses as an InternalRaftRequest: the fixture proves nothing")
	}
}

func TestV2EntryAfterSnapshot(t *testing.T) {
	tests := []struct {
		name  string
		build func(w *walBuilder, t *testing.T)
		want  uint64
	}{
		{"only v3 entries", func(w *walBuilder, t *testing.T) {
			w.entry(1, v3Request(t))
			w.entry(2, v3Request(t))
		}, 0},
		{"a v2 entry etcd replays", func(w *walBuilder, t *testing.T) {
			w.entry(1, v3Request(t))
			w.entry(2, v2Request())
			w.entry(3, v3Request(t))
		}, 2},
		{"a v2 entry before the latest snapshot is not replayed", func(w *walBuilder, t *testing.T) {
			w.entry(1, v2Request())
			w.entry(2, v3Request(t))
			w.snapshot(2)
			w.entry(3, v3Request(t))
		}, 0},
		{"a v2 entry overwritten at its index by a new leader's", func(w *walBuilder, t *testing.T) {
			w.entry(1, v3Request(t))
			w.entry(2, v2Request())
			w.entry(2, v3Request(t))
		}, 0},
		{"an empty normal entry (a new leader's) is no request", func(w *walBuilder, t *testing.T) {
			w.entry(1, nil)
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			w := &walBuilder{}
			w.metadata(0xabc)
			tt.build(w, t)
			w.write(t, dir, "0000000000000000-0000000000000000.wal")
			got, err := V2EntryAfterSnapshot(dir)
			if err != nil || got != tt.want {
				t.Errorf("V2EntryAfterSnapshot = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
	if got, err := V2EntryAfterSnapshot(t.TempDir()); got != 0 || err != nil {
		t.Errorf("no WAL: %d, %v", got, err)
	}
}

// TestDecideRefuses37OnV2WAL: etcd 3.7 is refused on data whose storage version is 3.6 but whose
// WAL still holds a v2 entry after its snapshot (found by the e2e TestVersionEditedAtEachTurn: 3.7
// exited 1 on every start, the member was replaced as crash-looping and its PVC deleted); 3.6 is
// not, and neither is 3.7 once a snapshot covers the entry.
func TestDecideRefuses37OnV2WAL(t *testing.T) {
	build := func(t *testing.T, snapshot bool) string {
		dir := t.TempDir()
		w := &walBuilder{}
		w.metadata(0xabc)
		w.entry(1, v2Request())
		w.entry(2, v3Request(t))
		if snapshot {
			w.snapshot(2)
		}
		w.write(t, dir, "0000000000000000-0000000000000000.wal")
		withBackend(t, dir, "3.6.0", false)
		return dir
	}
	dir := build(t, false)
	err := Decide(RunOptions{DataDir: dir, MemberID: "abc", EtcdVersion: "3.7.3"})
	var v *Verdict
	if !errors.As(err, &v) || v.Result.Verdict != VersionRefused || !strings.Contains(v.Result.Message, "entry 1") {
		t.Fatalf("etcd 3.7 on a WAL with a v2 entry: %v, want VersionRefused naming entry 1", err)
	}
	if err := Decide(RunOptions{DataDir: dir, MemberID: "abc", EtcdVersion: "3.6.16"}); err != nil {
		t.Errorf("etcd 3.6 on the same data: %v, want it allowed", err)
	}
	if err := Decide(RunOptions{DataDir: build(t, true), MemberID: "abc", EtcdVersion: "3.7.3"}); err != nil {
		t.Errorf("etcd 3.7 once a snapshot covers the v2 entry: %v, want it allowed", err)
	}
}
