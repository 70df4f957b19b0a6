package snapshot

import (
	"cmp"
	"slices"
)

// valuePrefix is how much of a revision's value is kept to check it: the KeyValue's key and
// the two revisions after it fit for keys up to ~4 KiB.
const valuePrefix = 4096 + maxRevisionFields + 16

// pageParser follows one page through the stream: first its header, then its element headers,
// then the byte ranges of the elements worth reading, one at a time. A page is at most a
// header and the current range in memory, however large its overflow.
type pageParser struct {
	start, end int64  // the page's bytes in the stream
	id         uint64 // its page id, as its header must say
	phase      int    // parsing the page header, the element headers, or element data
	lo, hi     int64  // the range being read
	buf        []byte
	elemEnd    int64
	captures   []capture
	root       bool
	meta       metaValues
}

const (
	phaseHeader = iota
	phaseElements
	phaseData
	phaseBranch
)

// capture is one element's bytes to read: its key and (a prefix of) its value.
type capture struct {
	lo, hi       int64
	flags, ksize uint32
	vsize        uint32
}

// reset prepares the parser for the page starting at offset start, keeping its buffers.
func (pp *pageParser) reset(start, pageSize int64) {
	*pp = pageParser{start: start, id: uint64(start / pageSize), lo: start, hi: start + pageHeaderSize,
		buf: pp.buf[:0], captures: pp.captures[:0]}
}

// feed gives the parser the stream bytes p starting at offset at; it returns true when the
// parser is done (finished, or the page turned out not to be a leaf page).
func (pp *pageParser) feed(s *Scanner, at int64, p []byte) bool {
	end := at + int64(len(p))
	for {
		need := pp.lo + int64(len(pp.buf))
		if need < at {
			return true // bytes already gone: a range set out of order, only in a corrupt page
		}
		if need >= end {
			return false
		}
		upto := min(pp.hi, end)
		pp.buf = append(pp.buf, p[need-at:upto-at]...)
		if upto < pp.hi {
			return false
		}
		if !pp.complete(s) {
			return true
		}
	}
}

// complete handles a finished range and sets the next one; false means the parser is done.
func (pp *pageParser) complete(s *Scanner) bool {
	b := pp.buf
	pp.buf = pp.buf[:0]
	switch pp.phase {
	case phaseHeader:
		h := parsePageHeader(b)
		pp.end = pp.start + (int64(h.overflow)+1)*s.ps
		pp.elemEnd = pp.start + pageHeaderSize + int64(h.count)*leafElementSize
		// A freed page may start with anything, including another page's leftovers; only a
		// header naming this very page id is believed.
		if h.flags == branchPageFlag {
			pp.elemEnd = pp.start + pageHeaderSize + int64(h.count)*branchElemSize
		}
		if h.id != pp.id || (h.flags != leafPageFlag && h.flags != branchPageFlag) || h.count == 0 ||
			pp.end > s.dbLen || pp.elemEnd > pp.end {
			return false
		}
		if h.flags == branchPageFlag {
			pp.phase, pp.lo, pp.hi = phaseBranch, pp.start+pageHeaderSize, pp.elemEnd
			return true
		}
		pp.root = pp.id == s.meta.root
		s.rootSeen = s.rootSeen || pp.root
		pp.phase, pp.lo, pp.hi = phaseElements, pp.start+pageHeaderSize, pp.elemEnd
		return true
	case phaseBranch:
		kids := make([]uint64, 0, len(b)/branchElemSize)
		for i := 0; i+branchElemSize <= len(b); i += branchElemSize {
			kids = append(kids, le.Uint64(b[i+8:]))
		}
		s.children[pp.id] = kids
		return false
	case phaseElements:
		pp.plan(s, b)
		pp.phase = phaseData
		return pp.nextCapture()
	default:
		c := pp.captures[0]
		pp.captures = pp.captures[1:]
		pp.element(s, c, b[:c.ksize], b[c.ksize:])
		return pp.nextCapture()
	}
}

// plan picks the elements worth reading from the element headers in b.
func (pp *pageParser) plan(s *Scanner, b []byte) {
	pp.captures = pp.captures[:0]
	for i := 0; i+leafElementSize <= len(b); i += leafElementSize {
		e := parseLeafElement(b[i:])
		lo := pp.start + pageHeaderSize + int64(i) + int64(e.pos)
		if lo < pp.elemEnd || lo+int64(e.ksize)+int64(e.vsize) > pp.end {
			continue // points outside the page's data: not a live leaf
		}
		var keep uint32
		switch {
		case pp.root || e.flags&bucketLeafFlag != 0:
			keep = min(e.vsize, uint32(s.ps)) // bucket header and any inline page
		case e.ksize == 17 || e.ksize == 18:
			keep = min(e.vsize, valuePrefix) // a revision key (or finishedCompactRev: also 18)
		case e.ksize == uint32(len(scheduledCompactKey)) || e.ksize == uint32(len(storageVersionKey)):
			keep = min(e.vsize, 64)
		default:
			continue
		}
		pp.captures = append(pp.captures, capture{lo: lo, hi: lo + int64(e.ksize) + int64(keep), flags: e.flags, ksize: e.ksize, vsize: e.vsize})
	}
	// bbolt lays keys and values out in element order; a page that does not is skipped rather
	// than read twice.
	slices.SortFunc(pp.captures, func(a, b capture) int { return cmp.Compare(a.lo, b.lo) })
	last := pp.elemEnd
	pp.captures = slices.DeleteFunc(pp.captures, func(c capture) bool {
		if c.lo < last {
			return true
		}
		last = c.hi
		return false
	})
}

func (pp *pageParser) nextCapture() bool {
	if len(pp.captures) == 0 {
		return false
	}
	pp.lo, pp.hi = pp.captures[0].lo, pp.captures[0].hi
	return true
}

func (pp *pageParser) element(s *Scanner, c capture, k, v []byte) {
	switch {
	case pp.root && c.flags&bucketLeafFlag != 0:
		s.rootEntry(k, v)
	case c.flags&bucketLeafFlag != 0:
		// A bucket entry outside the root page: etcd nests no buckets, but a root bucket grown
		// into a branch would put them here. Its inline data, if any, is read like any page.
		inlineLeaf(v, func(ik, iv []byte) { s.revisionEntry(pp.id, ik, iv, uint32(len(iv))) })
	default:
		s.revisionEntry(pp.id, k, v, c.vsize)
		if pp.meta.add(k, v) {
			s.metaCandidate(pp.id, pp.meta)
		}
	}
}
