package snapshot

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"slices"
)

// Scanner finds a snapshot's revision while it streams past (it is an io.Writer; nothing is
// kept but a few small buffers and a few bytes per page), and checks the sha256 etcd appends to
// every snapshot stream.
//
// etcd's Snapshot RPC says nothing about the revision it captured. The snapshot is a bbolt file
// streamed page by page in page order, while bbolt's trees link pages in any order. So the
// scanner looks at every page boundary: where a leaf page starts (its header names its own page
// id) it reads the element headers and then only the keys that matter and a prefix of their
// values, remembering each leaf's highest revision key; where a branch page starts it remembers
// the children. At the end it walks bucket "key" from its root (named by the root bucket's page,
// which the meta page names) and takes the highest revision of the leaves it reaches:
//
//	max(highest mvcc revision key of bucket "key", finishedCompactRev, scheduledCompactRev, 1)
//
// which is exactly the revision etcd itself serves after starting on the file (storage/mvcc
// kvstore.restore takes the same maximum: compaction may have removed the newest revisions when
// they were deletions).
//
// Only reachable pages count because bbolt's Tx.WriteTo copies the whole file, free pages too,
// while etcd keeps writing: a page free in the snapshot's transaction may be reused by a later
// commit before the copy reaches it, and then holds revisions the snapshot does not.
type Scanner struct {
	off     int64 // bytes written so far
	head    []byte
	meta    boltMeta
	ps      int64 // page size; 0 until page 0 was read
	dbLen   int64 // pgid * page size: where etcd's trailing sha256 starts
	next    int64 // the next page boundary to look at
	db      hash.Hash
	trailer []byte
	extra   int64 // bytes after the database
	active  []*pageParser
	free    []*pageParser // done parsers, reused: one starts at every page boundary
	err     error

	leafRev    []int64             // by page id: the highest revision key of that leaf page
	children   map[uint64][]uint64 // by page id: a branch page's children
	inlineRev  int64               // the key bucket's highest revision when it is inline in the root
	rootSeen   bool
	buckets    map[string]uint64     // root bucket's entries: name -> root page (0: inline)
	inlineMeta metaValues            // the "meta" bucket, when it is inline in the root page
	metaCands  map[uint64]metaValues // leaf pages holding meta keys, by page id
	metaRest   metaValues            // merged candidates past maxMetaCandidates
}

// maxMetaCandidates bounds the pages remembered for holding meta keys (stale copies of the meta
// bucket in freed pages); past it they are merged, which only matters if the live one is among
// them and the root page cannot say which it is.
const maxMetaCandidates = 4096

func (s *Scanner) metaCandidate(page uint64, m metaValues) {
	if _, ok := s.metaCands[page]; ok || len(s.metaCands) < maxMetaCandidates {
		s.metaCands[page] = m
		return
	}
	s.metaRest = s.metaRest.merge(m)
}

// ScanResult is what the scanner learnt.
type ScanResult struct {
	// Revision is the revision etcd serves after starting on this snapshot (see Scanner).
	Revision int64
	// KeyRevision is the highest revision key of bucket "key" (what etcdutl snapshot status says).
	KeyRevision int64
	// CompactRevision is the finished compaction, ScheduledCompactRevision the latest started.
	CompactRevision, ScheduledCompactRevision int64
	// StorageVersion is the meta bucket's storageVersion ("3.6.0"); empty before etcd 3.6.
	StorageVersion string
	// DBSize is the bbolt file's size; RawSize includes etcd's 32-byte trailing sha256.
	DBSize, RawSize int64
	// HasHash says the stream ended with etcd's sha256 of the database, and it matched.
	HasHash bool
}

type metaValues struct {
	finished, scheduled int64
	storageVersion      string
}

func (m *metaValues) add(k, v []byte) bool {
	switch string(k) {
	case finishedCompactKey:
		r, ok := compactRevision(v)
		m.finished = max(m.finished, r)
		return ok
	case scheduledCompactKey:
		r, ok := compactRevision(v)
		m.scheduled = max(m.scheduled, r)
		return ok
	case storageVersionKey:
		if len(v) > 0 && len(v) < 32 {
			m.storageVersion = string(v)
			return true
		}
	}
	return false
}

func (m metaValues) merge(o metaValues) metaValues {
	m.finished, m.scheduled = max(m.finished, o.finished), max(m.scheduled, o.scheduled)
	if o.storageVersion > m.storageVersion { // only used when the meta bucket was not found
		m.storageVersion = o.storageVersion
	}
	return m
}

// NewScanner returns a scanner for one snapshot stream.
func NewScanner() *Scanner {
	return &Scanner{db: sha256.New(), buckets: map[string]uint64{}, metaCands: map[uint64]metaValues{},
		children: map[uint64][]uint64{}}
}

// Write consumes the next bytes of the stream. It fails only on a stream that is not an etcd
// snapshot; after that it keeps accepting bytes so a pipeline around it is not disturbed.
func (s *Scanner) Write(p []byte) (int, error) {
	n := len(p)
	if s.err != nil {
		return n, nil
	}
	if s.ps == 0 {
		need := pageHeaderSize + metaSize - len(s.head)
		take := min(need, len(p))
		s.head = append(s.head, p[:take]...)
		if len(s.head) < pageHeaderSize+metaSize {
			s.db.Write(p)
			s.off += int64(n)
			return n, nil
		}
		if s.meta, s.err = parseMeta(s.head); s.err != nil {
			return n, nil
		}
		s.ps, s.dbLen, s.next = int64(s.meta.pageSize), int64(s.meta.pgid)*int64(s.meta.pageSize), 2*int64(s.meta.pageSize)
		s.leafRev = make([]int64, s.meta.pgid)
	}
	if dbPart := max(0, min(int64(len(p)), s.dbLen-s.off)); dbPart > 0 {
		s.db.Write(p[:dbPart])
		s.scan(p[:dbPart])
		p = p[dbPart:]
		s.off += dbPart
	}
	if len(p) > 0 {
		s.extra += int64(len(p))
		if room := 64 - len(s.trailer); room > 0 {
			s.trailer = append(s.trailer, p[:min(room, len(p))]...)
		}
		s.off += int64(len(p))
	}
	return n, nil
}

// scan feeds database bytes at s.off to the page parsers, starting one at every page boundary.
func (s *Scanner) scan(p []byte) {
	end := s.off + int64(len(p))
	for s.next < end && s.next < s.dbLen {
		var pp *pageParser
		if n := len(s.free); n > 0 {
			pp, s.free = s.free[n-1], s.free[:n-1]
		} else {
			pp = &pageParser{}
		}
		pp.reset(s.next, s.ps)
		s.active = append(s.active, pp)
		s.next += s.ps
	}
	s.active = slices.DeleteFunc(s.active, func(pp *pageParser) bool {
		if pp.feed(s, s.off, p) {
			s.free = append(s.free, pp)
			return true
		}
		return false
	})
}

// Result checks that the stream was complete and returns what the scanner found.
func (s *Scanner) Result() (ScanResult, error) {
	if s.err != nil {
		return ScanResult{}, s.err
	}
	if s.ps == 0 {
		return ScanResult{}, fmt.Errorf("snapshot stream ended after %d bytes, before its first page", s.off)
	}
	if s.off < s.dbLen {
		return ScanResult{}, fmt.Errorf("snapshot stream ended after %d of the database's %d bytes", s.off, s.dbLen)
	}
	r := ScanResult{KeyRevision: s.keyRevision(), DBSize: s.dbLen, RawSize: s.off}
	switch {
	case s.extra == 0:
	case s.extra != sha256.Size:
		return ScanResult{}, fmt.Errorf("snapshot stream has %d bytes after the database; etcd appends a %d-byte sha256", s.extra, sha256.Size)
	case !bytes.Equal(s.trailer, s.db.Sum(nil)):
		return ScanResult{}, errors.New("snapshot stream is corrupt: etcd's sha256 of the database does not match its bytes")
	default:
		r.HasHash = true
	}
	m := s.metaBucket()
	r.CompactRevision, r.ScheduledCompactRevision, r.StorageVersion = m.finished, m.scheduled, m.storageVersion
	r.Revision = max(r.KeyRevision, m.finished, m.scheduled, 1) // an empty etcd is at revision 1
	return r, nil
}

// metaBucket returns the live meta bucket's values when the root page said where it is (inline
// in the root page, or its own leaf page), else the highest values of every page holding meta
// keys: compaction revisions only grow, so stale copies in freed pages are lower.
func (s *Scanner) metaBucket() metaValues {
	if root, ok := s.buckets[metaBucket]; ok && s.rootSeen {
		if root == 0 {
			return s.inlineMeta
		}
		if m, ok := s.metaCands[root]; ok {
			return m
		}
	}
	m := s.inlineMeta.merge(s.metaRest)
	for _, c := range s.metaCands {
		m = m.merge(c)
	}
	return m
}

// keyRevision walks bucket "key" from its root through the branch pages seen and returns the
// highest revision of the leaves it reaches. Without the root page (a root bucket grown into
// branches, which etcd's dozen buckets never do) every leaf counts, as the best left.
func (s *Scanner) keyRevision() int64 {
	root, ok := s.buckets[keyBucket]
	switch {
	case !s.rootSeen || !ok:
		return max(s.inlineRev, slices.Max(append(s.leafRev, 0)))
	case root == 0:
		return s.inlineRev
	}
	best, seen, stack := int64(0), make([]bool, len(s.leafRev)), []uint64{root}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if id >= uint64(len(seen)) || seen[id] {
			continue
		}
		seen[id] = true
		best = max(best, s.leafRev[id])
		stack = append(stack, s.children[id]...)
	}
	return best
}

// revisionEntry records a key/value of the "key" bucket's leaf page (or of any page: which bucket
// a page belongs to is known only at the end). page 0 is the root page's inline key bucket.
func (s *Scanner) revisionEntry(page uint64, k, v []byte, vsize uint32) {
	main, tomb, ok := revisionKey(k)
	if !ok || !plausibleRevision(main, tomb, v, vsize) {
		return
	}
	if page == 0 {
		s.inlineRev = max(s.inlineRev, main)
	} else if page < uint64(len(s.leafRev)) {
		s.leafRev[page] = max(s.leafRev[page], main)
	}
}

// rootEntry records one element of the root bucket's page: an etcd bucket.
func (s *Scanner) rootEntry(name, v []byte) {
	if len(v) < bucketHeader {
		return
	}
	bucket := string(name)
	s.buckets[bucket] = le.Uint64(v)
	inlineLeaf(v, func(k, iv []byte) {
		switch bucket {
		case metaBucket:
			s.inlineMeta.add(k, iv)
		case keyBucket:
			s.revisionEntry(0, k, iv, uint32(len(iv)))
		}
	})
}
