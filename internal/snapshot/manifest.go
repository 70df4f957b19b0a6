package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/etcd-steward/steward/internal/objstore"
)

// FormatVersion is the manifest format this code writes; Fetch refuses a newer one.
const FormatVersion = 1

// ManifestName is the manifest's object name under a backup's key.
const ManifestName = "manifest.json"

// Compression of the snapshot object.
type Compression string

// The compressions Save writes and Fetch reads.
const (
	CompressionZstd Compression = "zstd"
	CompressionNone Compression = "none"
)

// ParseCompression accepts "zstd" and "none".
func ParseCompression(s string) (Compression, error) {
	switch c := Compression(s); c {
	case CompressionZstd, CompressionNone:
		return c, nil
	}
	return "", fmt.Errorf("compression %q: want zstd or none", s)
}

// ObjectName is the snapshot object's name under a backup's key.
func (c Compression) ObjectName() string {
	if c == CompressionZstd {
		return "snapshot.db.zst"
	}
	return "snapshot.db"
}

// Encryption of the snapshot object.
type Encryption string

// EncryptionAge seals with age (package encryption).
const EncryptionAge Encryption = "age"

// sealedSuffix ends a sealed object's name; metaEncryption and metaKeyID are its object metadata,
// so an object fetched without its manifest still says it is sealed, and under which key.
const (
	sealedSuffix   = ".age"
	metaEncryption = "encryption"
	metaKeyID      = "key-id"
)

// BackupKey is the key under which one backup's objects live: <namespace>/<cluster>/<backup>
// (the store adds its own prefix).
func BackupKey(namespace, cluster, backup string) string {
	return namespace + "/" + cluster + "/" + backup
}

// Member names the member a snapshot was taken from.
type Member struct {
	Name string `json:"name,omitempty"`
	// ID is the member ID in hex, as etcdctl prints it.
	ID string `json:"id"`
}

// Manifest describes one stored snapshot. It is written after the snapshot object is complete,
// so a backup without a manifest never finished.
type Manifest struct {
	FormatVersion int    `json:"formatVersion"`
	Namespace     string `json:"namespace"`
	Cluster       string `json:"cluster"`
	Backup        string `json:"backup"`
	Member        Member `json:"member"`
	// ClusterID is etcd's cluster ID in hex.
	ClusterID string `json:"clusterID"`
	// EtcdVersion is the server version of the member that took the snapshot ("3.6.16");
	// StorageVersion is its data format ("3.6.0"; empty before 3.6).
	EtcdVersion    string `json:"etcdVersion"`
	StorageVersion string `json:"storageVersion,omitempty"`
	// Revision is the revision etcd serves when started on the snapshot; CompactRevision is the
	// last finished compaction (older revisions are gone).
	Revision        int64       `json:"revision"`
	CompactRevision int64       `json:"compactRevision"`
	Compression     Compression `json:"compression"`
	// Encryption is "age" when the object is sealed (after compression), and KeyID the public
	// recipient of the key that sealed it; the key itself is never written.
	Encryption Encryption `json:"encryption,omitempty"`
	KeyID      string     `json:"keyID,omitempty"`
	// Object is the snapshot object's name under the backup's key.
	Object string `json:"object"`
	// Size and SHA256 (hex) are of the stored object's bytes (compressed); RawSize is the
	// uncompressed snapshot's, including the sha256 etcd appends to it.
	Size        int64     `json:"size"`
	SHA256      string    `json:"sha256"`
	RawSize     int64     `json:"rawSize"`
	StartedAt   time.Time `json:"startedAt"`
	CompletedAt time.Time `json:"completedAt"`
	// HashKV is the member's own hash of its keyspace at Revision, read right after the
	// snapshot; Verify compares it with the snapshot's (etcdutl hashkv, etcd 3.6+).
	HashKV *HashKV `json:"hashKV,omitempty"`
}

// HashKV is etcd's hash of the key-value history up to a revision, since a compaction.
type HashKV struct {
	Hash            uint32 `json:"hash"`
	CompactRevision int64  `json:"compactRevision"`
}

// minorOf returns the minor version of "3.6.16" or "3.6.0" (ok false if unparsable).
func minorOf(v string) (major, minor int, ok bool) {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	return ma, mi, err1 == nil && err2 == nil
}

// checkMinor refuses data newer than maxMinor ("3.6"). The storage version decides when there is
// one: it is what the data format is (a 3.6 server keeps 3.5 storage until the whole cluster
// runs 3.6); otherwise the server version, conservatively.
func checkMinor(storageVersion, etcdVersion, maxMinor string) error {
	if maxMinor == "" {
		return nil
	}
	wantMa, wantMi, ok := minorOf(maxMinor)
	if !ok {
		return fmt.Errorf("max minor %q: want a version like 3.6", maxMinor)
	}
	v, what := storageVersion, "storage version"
	if v == "" {
		v, what = etcdVersion, "etcd version"
	}
	if v == "" {
		return nil
	}
	ma, mi, ok := minorOf(v)
	if !ok {
		return fmt.Errorf("snapshot %s %q is not a version", what, v)
	}
	if ma > wantMa || (ma == wantMa && mi > wantMi) {
		return fmt.Errorf("the snapshot's %s is %s, newer than etcd %s that would restore it: restore with etcd %d.%d or later", what, v, maxMinor, ma, mi)
	}
	return nil
}

// ReadManifest reads <key>/manifest.json; a missing manifest is objstore.ErrNotFound.
func ReadManifest(ctx context.Context, store objstore.Store, key string) (Manifest, error) {
	rc, _, err := store.Get(ctx, key+"/"+ManifestName)
	if err != nil {
		return Manifest{}, err
	}
	defer func() { _ = rc.Close() }()
	var m Manifest
	dec := json.NewDecoder(io.LimitReader(rc, 1<<20))
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("manifest %s: %w", store.Location(key+"/"+ManifestName), err)
	}
	if m.FormatVersion > FormatVersion {
		return Manifest{}, fmt.Errorf("manifest %s has format %d; this Steward reads up to %d", store.Location(key+"/"+ManifestName), m.FormatVersion, FormatVersion)
	}
	return m, nil
}

func writeManifest(ctx context.Context, store objstore.Store, key string, m Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	_, err = store.Put(ctx, key+"/"+ManifestName, bytes.NewReader(append(b, '\n')), nil)
	return err
}

// Compression settings. Memory, not ratio, decides: one goroutine and a 4 MiB window (bbolt
// pages are written in page order, so matching data is rarely far apart) keep the encoder near
// 10 MiB; the decoder accepts windows up to 64 MiB so snapshots compressed by other tools work.
func newEncoder(w io.Writer) (*zstd.Encoder, error) {
	return zstd.NewWriter(w, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(4<<20),
		zstd.WithLowerEncoderMem(true), zstd.WithEncoderLevel(zstd.SpeedDefault))
}

func newDecoder(r io.Reader) (*zstd.Decoder, error) {
	return zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(64<<20))
}

// Delete removes a backup: its manifest first (a backup without one is unfinished, so a delete
// cut short never leaves something that looks complete), then every other object under its key.
// Objects already gone are not an error, so a delete can be repeated.
func Delete(ctx context.Context, store objstore.Store, key string) (deleted []string, err error) {
	objs, err := store.List(ctx, key+"/")
	if err != nil {
		return nil, err
	}
	manifest := key + "/" + ManifestName
	if err := store.Delete(ctx, manifest); err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.Key == manifest {
			deleted = append([]string{manifest}, deleted...)
			continue
		}
		if err := store.Delete(ctx, o.Key); err != nil {
			return deleted, err
		}
		deleted = append(deleted, o.Key)
	}
	return deleted, nil
}
