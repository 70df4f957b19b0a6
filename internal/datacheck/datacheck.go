// Package datacheck tells whether a member's data directory holds that member's data, before its
// etcd starts. etcd started with --initial-cluster-state=existing on an empty directory rejoins
// under its old member ID with no log and no memory of its votes (it can vote twice in a term),
// and on another member's data it starts as that member; neither may happen. The check runs in the
// etcd container before every start (`steward member run-etcd`, which then runs etcd as its child),
// and a member that fails it is replaced (removed, its PVC deleted, a fresh learner added).
//
// The check also holds etcd to its data's storage version (version.go): an etcd more than one minor
// newer than the data, or older than it, is not started. That member's data is intact and it is
// never replaced for it; only a version its data accepts fixes it.
package datacheck

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Verdicts.
const (
	OK      = "OK"
	Empty   = "Empty"   // no WAL: the data is gone
	Foreign = "Foreign" // the WAL belongs to another member
)

// Result is a check's outcome; Message says it for humans.
type Result struct {
	Verdict  string `json:"verdict"`
	MemberID string `json:"memberID,omitempty"` // the ID the WAL names, hex
	Message  string `json:"message"`
}

// Check reads dataDir/member/wal and compares the member ID of its first WAL file with wantID
// (0: any ID passes). Only the first records of one file are read: O(1) whatever the size.
func Check(dataDir string, wantID uint64) (Result, error) {
	walDir := filepath.Join(dataDir, "member", "wal")
	entries, err := os.ReadDir(walDir)
	if errors.Is(err, os.ErrNotExist) {
		return Result{Verdict: Empty, Message: fmt.Sprintf("%s holds no etcd member (no %s): the member's data is lost", dataDir, walDir)}, nil
	}
	if err != nil {
		return Result{}, err
	}
	var wals []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".wal") {
			wals = append(wals, e.Name())
		}
	}
	if len(wals) == 0 {
		return Result{Verdict: Empty, Message: fmt.Sprintf("%s has no WAL file: the member's data is lost", walDir)}, nil
	}
	slices.Sort(wals) // named <seq>-<index>.wal in hex: the first holds the metadata written at creation
	id, err := walNodeID(filepath.Join(walDir, wals[0]))
	if err != nil {
		return Result{}, fmt.Errorf("reading %s: %w", wals[0], err)
	}
	r := Result{Verdict: OK, MemberID: fmt.Sprintf("%x", id), Message: fmt.Sprintf("the data belongs to member %x", id)}
	if wantID != 0 && id != wantID {
		r.Verdict = Foreign
		r.Message = fmt.Sprintf("%s holds member %x's data, not %x's", dataDir, id, wantID)
	}
	return r, nil
}

// WAL record types and walpb.Record / etcdserverpb.Metadata field numbers.
const (
	metadataType   = 1
	recType        = 1
	recData        = 3
	metaNodeID     = 1
	maxRecordBytes = 10 << 20
)

// walNodeID finds the metadata record among a WAL file's first records.
func walNodeID(path string) (uint64, error) {
	var id uint64
	found, seen := false, 0
	err := walRecords(path, func(typ int64, data []byte) (bool, error) {
		seen++
		if typ == metadataType {
			var err error
			id, err = nodeID(data)
			found = true
			return true, err
		}
		return seen == 8, nil
	})
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, errors.New("no metadata record among the first WAL records")
	}
	return id, nil
}

// walRecords calls fn with each record of a WAL file, in order, until fn says stop or the records
// end: each is an 8-byte little-endian length (low 56 bits; the top byte flags padding) and a
// walpb.Record padded to 8. A zero length is the preallocated rest of the file; a torn last
// record (etcd repairs it on start, replaying nothing of it) ends the records too.
func walRecords(path string, fn func(typ int64, data []byte) (stop bool, err error)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	br := bufio.NewReader(f)
	for {
		var lenField uint64
		if err := binary.Read(br, binary.LittleEndian, &lenField); errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		} else if err != nil {
			return err
		}
		n := int64(lenField & ^(uint64(0xff) << 56))
		if n == 0 {
			return nil
		}
		pad := int64(0)
		if lenField&(uint64(0x80)<<56) != 0 {
			pad = int64((lenField >> 56) & 0x7)
		}
		if n < 0 || n > maxRecordBytes {
			return fmt.Errorf("implausible WAL record length %d", n)
		}
		buf := make([]byte, n+pad)
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil
		}
		typ, data := record(buf[:n])
		if stop, err := fn(typ, data); stop || err != nil {
			return err
		}
	}
}

// record decodes walpb.Record's type and data.
func record(b []byte) (typ int64, data []byte) {
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, nil
		}
		b = b[n:]
		switch {
		case num == recType && wt == protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			typ, n = int64(v), m
		case num == recData && wt == protowire.BytesType:
			data, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, wt, b)
		}
		if n < 0 {
			return 0, nil
		}
		b = b[n:]
	}
	return typ, data
}

// nodeID decodes etcdserverpb.Metadata's NodeID.
func nodeID(b []byte) (uint64, error) {
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, errors.New("bad metadata")
		}
		b = b[n:]
		if num == metaNodeID && wt == protowire.VarintType {
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return 0, errors.New("bad metadata")
			}
			return v, nil
		}
		if n = protowire.ConsumeFieldValue(num, wt, b); n < 0 {
			return 0, errors.New("bad metadata")
		}
		b = b[n:]
	}
	return 0, errors.New("metadata without a node ID")
}
