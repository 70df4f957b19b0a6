package snapshot

import (
	"encoding/binary"
	"math"
)

// What etcd keeps in bbolt, as far as the revision is concerned (go.etcd.io/etcd/server/v3,
// storage/mvcc and storage/schema):
//
//   - bucket "key": one entry per revision. The key is the revision: main (8 bytes, big-endian),
//     '_', sub (8 bytes); a deletion ("tombstone") adds a trailing 't'. The value is the
//     mvccpb.KeyValue at that revision, or empty for the marker `etcdutl snapshot restore
//     --bump-revision` writes.
//   - bucket "meta": finishedCompactRev and scheduledCompactRev (revision-encoded, 17 bytes) and,
//     since 3.6, storageVersion ("3.6.0").

var (
	metaBucket          = "meta"
	keyBucket           = "key"
	finishedCompactKey  = "finishedCompactRev"
	scheduledCompactKey = "scheduledCompactRev"
	storageVersionKey   = "storageVersion"
)

// revisionKey returns the main revision of an mvcc revision key.
func revisionKey(k []byte) (main int64, tombstone, ok bool) {
	switch {
	case len(k) == 17 && k[8] == '_':
	case len(k) == 18 && k[8] == '_' && k[17] == 't':
		tombstone = true
	default:
		return 0, false, false
	}
	m := binary.BigEndian.Uint64(k)
	if m == 0 || m > math.MaxInt64 {
		return 0, false, false
	}
	return int64(m), tombstone, true
}

// plausibleRevision tells whether value (perhaps only its first bytes; vsize is its full length)
// is what etcd stores under revision key main: a KeyValue whose mod_revision is main, a tombstone's
// KeyValue (the key alone), or the empty bump marker. Free pages and other buckets can hold keys
// of the same shape (a user named like a revision key in "authUsers", say); their values are not
// KeyValues with a matching mod_revision.
func plausibleRevision(main int64, tombstone bool, value []byte, vsize uint32) bool {
	if vsize == 0 {
		return true
	}
	// field 1 (key), length-delimited
	if len(value) < 2 || value[0] != 0x0a {
		return false
	}
	klen, n := binary.Uvarint(value[1:])
	if n <= 0 || klen == 0 {
		return false
	}
	rest := 1 + uint64(n) + klen
	if rest > uint64(vsize) {
		return false
	}
	if tombstone {
		return true
	}
	if uint64(len(value)) < uint64(vsize) && rest+maxRevisionFields > uint64(len(value)) {
		// Only a prefix of the value was kept and the key fills it (keys longer than a few KiB):
		// all that can be checked is that the revisions fit after it.
		return rest+4 <= uint64(vsize)
	}
	// field 2 (create_revision) then field 3 (mod_revision), varints
	v := value[rest:]
	if len(v) < 2 || v[0] != 0x10 {
		return false
	}
	_, n2 := binary.Uvarint(v[1:])
	if n2 <= 0 || 1+n2 >= len(v) || v[1+n2] != 0x18 {
		return false
	}
	mod, n3 := binary.Uvarint(v[2+n2:])
	return n3 > 0 && mod == uint64(main)
}

// maxRevisionFields is the most create_revision and mod_revision take: two tags, two varints.
const maxRevisionFields = 1 + binary.MaxVarintLen64 + 1 + binary.MaxVarintLen64

// compactRevision decodes a meta value holding a revision.
func compactRevision(v []byte) (int64, bool) {
	if len(v) != 17 {
		return 0, false
	}
	m := binary.BigEndian.Uint64(v)
	if m > math.MaxInt64 {
		return 0, false
	}
	return int64(m), true
}
