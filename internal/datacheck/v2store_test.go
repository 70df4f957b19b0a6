package datacheck

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v2store"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// v2Write is a v2 request (as etcd 3.5 proposes a v2 API write) to path.
func v2Write(path string) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 0x99)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, "PUT")
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendString(b, path)
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	return protowire.AppendString(b, "v")
}

// v2Snapshot writes a v2 snapshot at index the way etcd does (its snap package), of a v2 store
// holding etcd's own cluster version and, with user, a key written through the v2 API.
func v2Snapshot(t *testing.T, dir string, index uint64, user bool) {
	t.Helper()
	st := v2store.New(v2ClusterPrefix, v2KeysPrefix)
	if _, err := st.Set("/0/version", false, "3.5.0", v2store.TTLOptionSet{ExpireTime: v2store.Permanent}); err != nil {
		t.Fatal(err)
	}
	if user {
		if _, err := st.Set("/1/app/config", false, "x", v2store.TTLOptionSet{ExpireTime: v2store.Permanent}); err != nil {
			t.Fatal(err)
		}
	}
	data, err := st.Save()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "member", "snap"), 0o700); err != nil {
		t.Fatal(err)
	}
	s := snap.New(zap.NewNop(), filepath.Join(dir, "member", "snap"))
	if err := s.SaveSnap(&raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{Index: &index, Term: proto.Uint64(2)}}); err != nil {
		t.Fatal(err)
	}
}

// data35 is a 3.5 member's data (a backend with no storage version, a WAL), optionally with a v2
// snapshot at index 2 (with or without a user's key) and a v2 write at index 3.
func data35(t *testing.T, snapshot, userInSnapshot bool, walWrite string) string {
	t.Helper()
	dir := t.TempDir()
	w := &walBuilder{}
	w.metadata(0xabc)
	w.entry(1, v2Request())
	w.entry(2, v3Request(t))
	if snapshot {
		w.snapshot(2)
		v2Snapshot(t, dir, 2, userInSnapshot)
	}
	if walWrite != "" {
		w.entry(3, v2Write(walWrite))
	}
	w.write(t, dir, "0000000000000000-0000000000000000.wal")
	withBackend(t, dir, "", true)
	return dir
}

func TestV2CustomContent(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		snapshot, userInSnap bool
		walWrite, want       string
	}{
		{name: "no snapshot, etcd's own v2 writes only"},
		{name: "a meta-only snapshot", snapshot: true},
		{name: "a user's key in the snapshot", snapshot: true, userInSnap: true, want: "the v2 store of snapshot 2"},
		{name: "a user's key written after the snapshot", snapshot: true, walWrite: "/1/app/x", want: "a v2 write to /1/app/x in the WAL (entry 3)"},
		{name: "a user's key and no snapshot", walWrite: "/1/k", want: "entry 3"},
		{name: "etcd's cluster version written after the snapshot", snapshot: true, walWrite: "/0/version"},
		{name: "a path that only starts like the keys", walWrite: "/10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := V2CustomContent(data35(t, tc.snapshot, tc.userInSnap, tc.walWrite))
			if err != nil {
				t.Fatal(err)
			}
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("V2CustomContent = %q, want %q", got, tc.want)
			}
		})
	}
	if got, err := V2CustomContent(t.TempDir()); got != "" || err != nil {
		t.Errorf("an empty directory: %q, %v", got, err)
	}
}

// The data check refuses etcd 3.6 (as VersionRefused: the data is intact) on 3.5 data with custom
// v2 content, and lets 3.5 run on it, or 3.6 with etcd's own skip flag.
func TestDecideRefuses36OnCustomV2Content(t *testing.T) {
	dir := data35(t, true, true, "")
	err := Decide(RunOptions{DataDir: dir, MemberID: "abc", EtcdVersion: "3.6.16"})
	var v *Verdict
	if !errors.As(err, &v) || v.Result.Verdict != VersionRefused || !strings.Contains(v.Result.Message, "custom v2 content") {
		t.Fatalf("etcd 3.6 on custom v2 content: %v, want VersionRefused", err)
	}
	if err := Decide(RunOptions{DataDir: dir, MemberID: "abc", EtcdVersion: "3.5.35"}); err != nil {
		t.Errorf("etcd 3.5 on the same data: %v", err)
	}
	skip := RunOptions{DataDir: dir, MemberID: "abc", EtcdVersion: "3.6.16", EtcdArgs: []string{"--v2-deprecation=write-only-skip-check"}}
	if err := Decide(skip); err != nil {
		t.Errorf("etcd 3.6 told to skip the check: %v", err)
	}
	if err := Decide(RunOptions{DataDir: data35(t, true, false, ""), MemberID: "abc", EtcdVersion: "3.6.16"}); err != nil {
		t.Errorf("etcd 3.6 on 3.5 data without custom content: %v", err)
	}
}
