package datacheck

// etcd replays its WAL's entries after the latest snapshot on every start, and from 3.7 on it
// applies each normal entry as an InternalRaftRequest and panics on anything else. etcd 3.5 also
// wrote v2 requests (member attributes, the cluster version) into the WAL; etcd 3.6 still reads
// them. So 3.7 cannot start on data whose WAL holds such an entry after its latest snapshot, even
// when the storage version is 3.6: a cluster born on 3.5 and rolled to 3.6 carries them until each
// member takes a snapshot on 3.6 (after --snapshot-count entries). Started anyway, 3.7 exits 1 on
// every start, which looks like a crash loop: the check refuses it first, with its own verdict.
//
// The WAL is read here without etcd's server packages, as Check reads it: only the records'
// framing, walpb.Record, walpb.Snapshot and raftpb.Entry fields are needed.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// WAL record types (walpb) and raftpb.Entry / walpb.Snapshot field numbers.
const (
	entryType    = 2
	snapshotType = 5
	entryKind    = 1 // raftpb.Entry.Type: 0 is EntryNormal
	entryIndex   = 3
	entryData    = 4
	snapIndex    = 1
	v2Path       = 3 // etcdserverpb.Request.Path
)

// V2EntryAfterSnapshot returns the index of the first entry etcd would replay (after the WAL's
// latest snapshot) that is not an InternalRaftRequest: a v2 request etcd 3.5 wrote. 0 when there
// is none, or no WAL.
func V2EntryAfterSnapshot(dataDir string) (uint64, error) {
	r, err := readWAL(dataDir)
	if err != nil {
		return 0, err
	}
	return r.firstV2(), nil
}

// readWAL replays every WAL file of dataDir in order; an empty replay when there is no WAL.
func readWAL(dataDir string) (*replay, error) {
	walDir := filepath.Join(dataDir, "member", "wal")
	wals, err := sortedFiles(walDir, ".wal")
	if err != nil {
		return nil, err
	}
	r := &replay{}
	for _, name := range wals {
		if err := r.readFile(filepath.Join(walDir, name)); err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
	}
	return r, nil
}

// sortedFiles are the names in dir ending in suffix, sorted (etcd's WAL and snapshot names are
// fixed-width hex, so by sequence); none when dir does not exist.
func sortedFiles(dir, suffix string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), suffix) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// replay follows the WAL as etcd reads it: a later entry at an index overwrites that index and
// everything after it; a snapshot record moves the replay's start past its index.
type replay struct {
	snapshot uint64
	entries  []walEntry
}

type walEntry struct {
	index uint64
	v2    bool
	// path is a v2 request's path ("/0/version", "/1/key" for a user's key).
	path string
}

func (r *replay) readFile(path string) error {
	return walRecords(path, func(typ int64, data []byte) (bool, error) {
		switch typ {
		case entryType:
			r.entry(data)
		case snapshotType:
			if i := varintField(data, snapIndex); i > r.snapshot {
				r.snapshot = i
			}
		}
		return false, nil
	})
}

func (r *replay) entry(b []byte) {
	var e walEntry
	var typ uint64
	var data []byte
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return
		}
		b = b[n:]
		switch {
		case num == entryKind && wt == protowire.VarintType:
			typ, n = protowire.ConsumeVarint(b)
		case num == entryIndex && wt == protowire.VarintType:
			e.index, n = protowire.ConsumeVarint(b)
		case num == entryData && wt == protowire.BytesType:
			data, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, wt, b)
		}
		if n < 0 {
			return
		}
		b = b[n:]
	}
	e.v2 = typ == 0 && len(data) > 0 && proto.Unmarshal(data, &pb.InternalRaftRequest{}) != nil
	if e.v2 {
		e.path = stringField(data, v2Path)
	}
	for len(r.entries) > 0 && r.entries[len(r.entries)-1].index >= e.index {
		r.entries = r.entries[:len(r.entries)-1]
	}
	r.entries = append(r.entries, e)
}

func (r *replay) firstV2() uint64 {
	for _, e := range r.entries {
		if e.index > r.snapshot && e.v2 {
			return e.index
		}
	}
	return 0
}

// stringField reads one length-delimited field of a message as a string ("" when absent).
func stringField(b []byte, field protowire.Number) string {
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		if num == field && wt == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return ""
			}
			return string(v)
		}
		if n = protowire.ConsumeFieldValue(num, wt, b); n < 0 {
			return ""
		}
		b = b[n:]
	}
	return ""
}

// varintField reads one varint field of a message (0 when absent).
func varintField(b []byte, field protowire.Number) uint64 {
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0
		}
		b = b[n:]
		if num == field && wt == protowire.VarintType {
			v, _ := protowire.ConsumeVarint(b)
			return v
		}
		if n = protowire.ConsumeFieldValue(num, wt, b); n < 0 {
			return 0
		}
		b = b[n:]
	}
	return 0
}
