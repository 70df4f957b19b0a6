package segment

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// Reader reads a segment frame by frame. Next returns revisions and leases in the order written;
// at the end it checks the trailer (io.EOF only after a whole trailer whose hash and counts match).
type Reader struct {
	r      *bufio.Reader
	h      hash.Hash
	header Header
	seen   Trailer
	done   bool
}

// NewReader reads the magic and the header.
func NewReader(r io.Reader) (*Reader, error) {
	sr := &Reader{r: bufio.NewReaderSize(r, 64<<10), h: sha256.New()}
	m := make([]byte, len(magic))
	if _, err := io.ReadFull(sr.r, m); err != nil {
		return nil, fmt.Errorf("not a segment: %w", truncated(err))
	}
	sr.h.Write(m)
	if string(m) != magic {
		return nil, errors.New("not a segment: wrong magic")
	}
	kind, b, err := sr.frame()
	if err != nil {
		return nil, err
	}
	if kind != kindHeader {
		return nil, fmt.Errorf("segment starts with frame %q, not a header", kind)
	}
	if err := json.Unmarshal(b, &sr.header); err != nil {
		return nil, fmt.Errorf("segment header: %w", err)
	}
	if sr.header.FormatVersion > FormatVersion || sr.header.FormatVersion < 1 {
		return nil, fmt.Errorf("segment format %d; this Steward reads 1 to %d", sr.header.FormatVersion, FormatVersion)
	}
	sr.seen.Last = sr.header.After
	return sr, nil
}

// Header is the segment's header.
func (r *Reader) Header() Header { return r.header }

// Next returns the next revision or lease (exactly one of them set), or io.EOF after a trailer that
// agrees with what was read.
func (r *Reader) Next() (*Revision, *Lease, error) {
	if r.done {
		return nil, nil, io.EOF
	}
	sum := r.h.Sum(nil)
	kind, b, err := r.frame()
	if err != nil {
		return nil, nil, err
	}
	switch kind {
	case kindLease:
		l, err := decodeLease(b)
		if err != nil {
			return nil, nil, err
		}
		r.seen.Leases++
		return nil, &l, nil
	case kindRevision:
		rev, err := decodeRevision(b)
		if err != nil {
			return nil, nil, err
		}
		if rev.Revision <= r.seen.Last {
			return nil, nil, fmt.Errorf("segment: revision %d after %d", rev.Revision, r.seen.Last)
		}
		if r.seen.Revisions == 0 {
			r.seen.First, r.seen.FirstStamp = rev.Revision, rev.Stamp
		}
		r.seen.Last, r.seen.LastStamp = rev.Revision, rev.Stamp
		r.seen.Revisions++
		r.seen.Events += len(rev.Events)
		return &rev, nil, nil
	case kindTrailer:
		return nil, nil, r.finish(b, hex.EncodeToString(sum))
	}
	return nil, nil, fmt.Errorf("segment: unknown frame %q", kind)
}

func (r *Reader) finish(b []byte, sum string) error {
	var t Trailer
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return fmt.Errorf("segment trailer: %w", err)
	}
	s := r.seen
	switch {
	case t.SHA256 != sum:
		return fmt.Errorf("segment hash %s, its trailer says %s: the segment was altered", sum, t.SHA256)
	case t.Revisions != s.Revisions || t.Events != s.Events || t.Leases != s.Leases ||
		(s.Revisions > 0 && (t.First != s.First || t.Last != s.Last || !t.FirstStamp.Equal(s.FirstStamp) || !t.LastStamp.Equal(s.LastStamp))):
		return fmt.Errorf("segment trailer says revisions %d-%d (%d, %d events, %d leases), read %d-%d (%d, %d, %d)",
			t.First, t.Last, t.Revisions, t.Events, t.Leases, s.First, s.Last, s.Revisions, s.Events, s.Leases)
	}
	if _, err := r.r.ReadByte(); !errors.Is(err, io.EOF) {
		return errors.New("segment: bytes after the trailer")
	}
	r.done = true
	return io.EOF
}

func (r *Reader) frame() (byte, []byte, error) {
	kind, err := r.r.ReadByte()
	if err != nil {
		return 0, nil, truncated(err)
	}
	n, err := binary.ReadUvarint(r.r)
	if err != nil {
		return 0, nil, truncated(err)
	}
	if n > maxFrame {
		return 0, nil, fmt.Errorf("segment frame of %d bytes: more than %d", n, maxFrame)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.r, b); err != nil {
		return 0, nil, truncated(err)
	}
	r.h.Write([]byte{kind})
	r.h.Write(binary.AppendUvarint(nil, n))
	r.h.Write(b)
	return kind, b, nil
}

func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: it ends before its trailer", ErrTruncated)
	}
	return err
}

func decodeLease(b []byte) (Lease, error) {
	rd := bytes.NewReader(b)
	id, err1 := binary.ReadUvarint(rd)
	ttl, err2 := binary.ReadVarint(rd)
	if err := errors.Join(err1, err2); err != nil || rd.Len() != 0 {
		return Lease{}, fmt.Errorf("segment: a malformed lease frame")
	}
	return Lease{ID: int64(id), TTL: ttl}, nil
}

func decodeRevision(b []byte) (Revision, error) {
	bad := func(what string) (Revision, error) {
		return Revision{}, fmt.Errorf("segment: a malformed revision frame (%s)", what)
	}
	rd := bytes.NewReader(b)
	rev, err := binary.ReadUvarint(rd)
	if err != nil || rev == 0 {
		return bad("revision")
	}
	stamp, err := binary.ReadVarint(rd)
	if err != nil {
		return bad("stamp")
	}
	flags, err := rd.ReadByte()
	if err != nil {
		return bad("flags")
	}
	n, err := binary.ReadUvarint(rd)
	if err != nil || n == 0 || n > uint64(rd.Len()) {
		return bad("event count")
	}
	out := Revision{Revision: int64(rev), Stamp: time.Unix(0, stamp).UTC(), Flags: flags, Events: make([]*mvccpb.Event, 0, n)}
	for range n {
		l, err := binary.ReadUvarint(rd)
		if err != nil || l > uint64(rd.Len()) {
			return bad("event length")
		}
		eb := make([]byte, l)
		_, _ = io.ReadFull(rd, eb)
		var e mvccpb.Event
		if err := proto.Unmarshal(eb, &e); err != nil {
			return bad(err.Error())
		}
		if e.GetKv().GetModRevision() != int64(rev) {
			return bad(fmt.Sprintf("an event of revision %d", e.GetKv().GetModRevision()))
		}
		out.Events = append(out.Events, &e)
	}
	if rd.Len() != 0 {
		return bad("trailing bytes")
	}
	return out, nil
}
