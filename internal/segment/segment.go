package segment

import (
	"bufio"
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

// FormatVersion is the segment format this code writes; Reader refuses a newer one.
const FormatVersion = 1

const magic = "STWSEG1\n"

// Frame kinds.
const (
	kindHeader   = 'H'
	kindLease    = 'L'
	kindRevision = 'R'
	kindTrailer  = 'T'
)

// maxFrame bounds one frame: a revision carries at most etcd's request size (1.5 MiB by default,
// --max-request-bytes up to 2 GiB is possible but unusual) in keys and values, plus framing.
const maxFrame = 256 << 20

// FlagLive marks a revision received in a watch response whose header revision was its own: the
// stream was caught up, and its stamp is within the watch's latency of the commit.
const FlagLive byte = 1

// Header opens a segment.
type Header struct {
	FormatVersion int `json:"formatVersion"`
	// ClusterID is etcd's cluster ID in hex: a replay refuses a segment of another cluster.
	ClusterID string `json:"clusterID"`
	// After is the revision this segment continues from: its first revision is After+1. The chain
	// is whole where each segment's After is the previous one's last revision (or a base's).
	After int64 `json:"after"`
	// Member is the member (hex ID) the streamer watched when it opened the segment.
	Member string `json:"member,omitempty"`
}

// Trailer closes a segment.
type Trailer struct {
	First     int64 `json:"first"`
	Last      int64 `json:"last"`
	Revisions int   `json:"revisions"`
	Events    int   `json:"events"`
	Leases    int   `json:"leases"`
	// FirstStamp and LastStamp are the first and last revision's stamps.
	FirstStamp time.Time `json:"firstStamp"`
	LastStamp  time.Time `json:"lastStamp"`
	// SHA256 is the hash of every byte before the trailer frame, magic included.
	SHA256 string `json:"sha256"`
}

// Revision is one revision's events, in etcd's order.
type Revision struct {
	Revision int64
	Stamp    time.Time
	Flags    byte
	Events   []*mvccpb.Event
}

// Live says the revision was stamped on arrival of a caught-up watch response.
func (r Revision) Live() bool { return r.Flags&FlagLive != 0 }

// Lease is a lease a put of the segment names, with the TTL it was granted.
type Lease struct {
	ID  int64
	TTL int64
}

// Writer writes one segment's frames to w. Close writes the trailer; a segment without it is
// refused by the Reader, so a writer abandoned half-way leaves nothing that replays.
type Writer struct {
	w       *bufio.Writer
	h       hash.Hash
	t       Trailer
	last    int64
	scratch []byte
	err     error
}

// NewWriter writes the magic and the header.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	h.FormatVersion = FormatVersion
	sw := &Writer{w: bufio.NewWriterSize(w, 64<<10), h: sha256.New(), last: h.After}
	if err := sw.write([]byte(magic)); err != nil {
		return nil, err
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	if err := sw.frame(kindHeader, b); err != nil {
		return nil, err
	}
	return sw, nil
}

// Last is the last revision written (the header's After before any).
func (w *Writer) Last() int64 { return w.last }

// Revisions is how many revisions were written.
func (w *Writer) Revisions() int { return w.t.Revisions }

// Lease records a lease's granted TTL; write it before the first revision that names it.
func (w *Writer) Lease(l Lease) error {
	b := binary.AppendUvarint(nil, uint64(l.ID))
	b = binary.AppendVarint(b, l.TTL)
	w.t.Leases++
	return w.frame(kindLease, b)
}

// Revision appends one revision: it must be the next after the last written, and non-empty (etcd
// opens a revision only for a transaction that changed something).
func (w *Writer) Revision(r Revision) error {
	if r.Revision <= w.last {
		return fmt.Errorf("revision %d after %d: revisions go up", r.Revision, w.last)
	}
	if len(r.Events) == 0 {
		return fmt.Errorf("revision %d has no events", r.Revision)
	}
	b := binary.AppendUvarint(w.scratch[:0], uint64(r.Revision))
	b = binary.AppendVarint(b, r.Stamp.UnixNano())
	b = append(b, r.Flags)
	b = binary.AppendUvarint(b, uint64(len(r.Events)))
	for _, e := range r.Events {
		if e.GetKv().GetModRevision() != r.Revision {
			return fmt.Errorf("revision %d carries an event of revision %d", r.Revision, e.GetKv().GetModRevision())
		}
		eb, err := proto.Marshal(e)
		if err != nil {
			return err
		}
		b = binary.AppendUvarint(b, uint64(len(eb)))
		b = append(b, eb...)
	}
	w.scratch = b
	if err := w.frame(kindRevision, b); err != nil {
		return err
	}
	if w.t.Revisions == 0 {
		w.t.First, w.t.FirstStamp = r.Revision, r.Stamp.UTC()
	}
	w.t.Last, w.t.LastStamp, w.last = r.Revision, r.Stamp.UTC(), r.Revision
	w.t.Revisions++
	w.t.Events += len(r.Events)
	return nil
}

// Close writes the trailer and flushes; it does not close the underlying writer.
func (w *Writer) Close() (Trailer, error) {
	if w.err != nil {
		return Trailer{}, w.err
	}
	w.t.SHA256 = hex.EncodeToString(w.h.Sum(nil))
	b, err := json.Marshal(w.t)
	if err != nil {
		return Trailer{}, err
	}
	if err := w.frame(kindTrailer, b); err != nil {
		return Trailer{}, err
	}
	return w.t, w.w.Flush()
}

func (w *Writer) frame(kind byte, payload []byte) error {
	if len(payload) > maxFrame {
		return fmt.Errorf("frame of %d bytes: more than %d", len(payload), maxFrame)
	}
	head := binary.AppendUvarint([]byte{kind}, uint64(len(payload)))
	if err := w.write(head); err != nil {
		return err
	}
	return w.write(payload)
}

func (w *Writer) write(b []byte) error {
	if w.err != nil {
		return w.err
	}
	w.h.Write(b)
	_, w.err = w.w.Write(b)
	return w.err
}

// ErrTruncated is returned (wrapped) for a segment that ends before its trailer.
var ErrTruncated = errors.New("truncated segment")
