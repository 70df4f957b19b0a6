package snapshot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
)

// The parts of bbolt's file format (go.etcd.io/bbolt, internal/common) the revision scanner reads.
// bbolt writes its structures in the host's byte order; every platform etcd supports in
// production (amd64, arm64, ppc64le) is little-endian, and a big-endian file is refused.
const (
	pageHeaderSize  = 16 // id u64, flags u16, count u16, overflow u32
	leafElementSize = 16 // flags u32, pos u32, ksize u32, vsize u32
	branchElemSize  = 16 // pos u32, ksize u32, child pgid u64
	metaSize        = 64 // magic, version, pageSize, flags u32; root bucket 16; freelist, pgid, txid, checksum u64
	bucketHeader    = 16 // root pgid u64, sequence u64; an inline page follows when root is 0

	branchPageFlag = 0x01
	leafPageFlag   = 0x02
	metaPageFlag   = 0x04
	bucketLeafFlag = 0x01 // on a leaf element: its value is a bucket

	boltMagic   = 0xED0CDAED
	boltVersion = 2
)

var le = binary.LittleEndian

// boltMeta is what the first meta page says.
type boltMeta struct {
	pageSize uint32
	root     uint64 // page of the root bucket (whose elements are etcd's buckets)
	pgid     uint64 // high-water mark: the file holds pgid pages
	txid     uint64
}

// parseMeta reads page 0 (header and meta) from b, checking magic, version and checksum.
func parseMeta(b []byte) (boltMeta, error) {
	if len(b) < pageHeaderSize+metaSize {
		return boltMeta{}, errors.New("snapshot too short for a bbolt meta page")
	}
	if flags := le.Uint16(b[8:]); flags != metaPageFlag {
		return boltMeta{}, fmt.Errorf("first page is not a bbolt meta page (flags %#x)", flags)
	}
	m := b[pageHeaderSize : pageHeaderSize+metaSize]
	switch magic := le.Uint32(m); {
	case magic == boltMagic:
	case binary.BigEndian.Uint32(m) == boltMagic:
		return boltMeta{}, errors.New("the snapshot is a big-endian bbolt file, which this scanner does not read")
	default:
		return boltMeta{}, fmt.Errorf("not a bbolt file (magic %#x)", magic)
	}
	if v := le.Uint32(m[4:]); v != boltVersion {
		return boltMeta{}, fmt.Errorf("bbolt file format version %d, want %d", v, boltVersion)
	}
	h := fnv.New64a()
	_, _ = h.Write(m[:56])
	if h.Sum64() != le.Uint64(m[56:]) {
		return boltMeta{}, errors.New("bbolt meta page checksum mismatch: the snapshot is corrupt")
	}
	meta := boltMeta{pageSize: le.Uint32(m[8:]), root: le.Uint64(m[16:]), pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}
	if ps := meta.pageSize; ps < 512 || ps > 1<<20 || ps&(ps-1) != 0 {
		return boltMeta{}, fmt.Errorf("implausible bbolt page size %d", ps)
	}
	if meta.pgid < 3 || meta.root >= meta.pgid {
		return boltMeta{}, fmt.Errorf("implausible bbolt meta (pages %d, root %d)", meta.pgid, meta.root)
	}
	return meta, nil
}

// pageHeader is the 16-byte header every page (and every inline bucket page) starts with.
type pageHeader struct {
	id       uint64
	flags    uint16
	count    uint16
	overflow uint32
}

func parsePageHeader(b []byte) pageHeader {
	return pageHeader{id: le.Uint64(b), flags: le.Uint16(b[8:]), count: le.Uint16(b[10:]), overflow: le.Uint32(b[12:])}
}

// leafElement is one key/value of a leaf page. pos is relative to the element's own header.
type leafElement struct {
	flags, pos, ksize, vsize uint32
}

func parseLeafElement(b []byte) leafElement {
	return leafElement{flags: le.Uint32(b), pos: le.Uint32(b[4:]), ksize: le.Uint32(b[8:]), vsize: le.Uint32(b[12:])}
}

// inlineLeaf calls fn with each key and value of an inline bucket's page (a bucket small enough
// that bbolt stores it inside its parent's value, as a fresh etcd's buckets are). A value that
// holds no inline page, or a page that does not parse, yields nothing (more).
func inlineLeaf(value []byte, fn func(key, value []byte)) {
	if len(value) < bucketHeader+pageHeaderSize || le.Uint64(value) != 0 {
		return // root != 0: the bucket lives in pages of its own
	}
	page := value[bucketHeader:]
	if h := parsePageHeader(page); h.flags == leafPageFlag {
		for i := range int(h.count) {
			off := pageHeaderSize + i*leafElementSize
			if off+leafElementSize > len(page) {
				return
			}
			e := parseLeafElement(page[off:])
			start := uint64(off) + uint64(e.pos)
			end := start + uint64(e.ksize) + uint64(e.vsize)
			if end > uint64(len(page)) {
				return
			}
			fn(page[start:start+uint64(e.ksize)], page[start+uint64(e.ksize):end])
		}
	}
}
