package datacheck

// etcd 3.6 refuses to start on data whose v2 store holds custom content (keys written through the
// v2 API, which etcd 3.5 serves with --enable-v2): its bootstrap loads the v2 snapshot and asks
// membership.IsMetaStoreOnly, and with the default --v2-deprecation=write-only an answer of no is
// fatal (exit 1, a crash loop). etcd's upgrade guide asks for `etcdutl check v2store` (etcdutl
// 3.5.32+) on every member before 3.6; the 3.6 image has no such command. So the data check runs
// the same check itself, offline, on the member's data before the first 3.6 etcd starts on it:
// the v2 snapshot through etcd's own snap, v2store and membership packages, and the WAL after it
// for v2 writes to user keys (as etcdutl 3.5.32 also scans). A refusal is VersionRefused: the
// data is intact and 3.5 still runs on it.

import (
	"fmt"
	"path/filepath"
	"strings"

	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v2store"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// v2 store namespaces (etcd's etcdserver.StoreClusterPrefix and StoreKeysPrefix): "/0" holds the
// membership and cluster version etcd itself keeps, "/1" the keys written through the v2 API.
const (
	v2ClusterPrefix = "/0"
	v2KeysPrefix    = "/1"
)

// V2CustomContent says where dataDir holds v2 content etcd 3.6 refuses to start on, "" when it
// holds none (or no data yet).
func V2CustomContent(dataDir string) (string, error) {
	var where []string
	s, err := newestV2Snapshot(filepath.Join(dataDir, "member", "snap"))
	if err != nil {
		return "", err
	}
	if s != nil {
		st := v2store.New(v2ClusterPrefix, v2KeysPrefix)
		if err := st.Recovery(s.Data); err != nil {
			return "", fmt.Errorf("reading the v2 store of snapshot %d: %w", s.GetMetadata().GetIndex(), err)
		}
		metaOnly, err := membership.IsMetaStoreOnly(st)
		if err != nil {
			return "", err
		}
		if !metaOnly {
			where = append(where, fmt.Sprintf("the v2 store of snapshot %d", s.GetMetadata().GetIndex()))
		}
	}
	r, err := readWAL(dataDir)
	if err != nil {
		return "", err
	}
	if e := r.firstV2Write(v2KeysPrefix); e != nil {
		where = append(where, fmt.Sprintf("a v2 write to %s in the WAL (entry %d)", e.path, e.index))
	}
	return strings.Join(where, " and "), nil
}

// newestV2Snapshot reads the newest v2 snapshot (member/snap/<term>-<index>.snap) that reads
// whole, with etcd's snap.Read; nil when there is none. Read only: etcd's Snapshotter.Load would
// also rename broken files and remove orphans, which is etcd's to do when it starts.
func newestV2Snapshot(dir string) (*raftpb.Snapshot, error) {
	names, err := sortedFiles(dir, ".snap") // %016x-%016x: by term, then index
	if err != nil {
		return nil, err
	}
	for i := len(names) - 1; i >= 0; i-- {
		if s, err := snap.Read(zap.NewNop(), filepath.Join(dir, names[i])); err == nil {
			return s, nil
		}
	}
	return nil, nil
}

// firstV2Write is the first entry etcd would replay that writes a v2 path under prefix.
func (r *replay) firstV2Write(prefix string) *walEntry {
	for i, e := range r.entries {
		if e.index > r.snapshot && e.v2 && (e.path == prefix || strings.HasPrefix(e.path, prefix+"/")) {
			return &r.entries[i]
		}
	}
	return nil
}
