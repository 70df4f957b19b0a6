package snapshot

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/etcd-steward/steward/internal/encryption"
	"github.com/etcd-steward/steward/internal/objstore"
)

// FetchOptions tune Fetch.
type FetchOptions struct {
	// ExpectSHA256 (hex) is the stored object's hash to insist on; empty takes the manifest's.
	ExpectSHA256 string
	// MaxMinor ("3.6") refuses snapshots of a newer etcd minor than the one that will restore.
	MaxMinor string
	// SkipIfExists: when this path exists (the member's data directory), do nothing, so a
	// restarted init container does not restore over a member that already started.
	SkipIfExists string
	// Keys open a sealed object (any of them); a sealed object without them is a clear error.
	// A plain object is read as it is, keys or not: a schedule that turned encryption on still
	// restores its older backups.
	Keys *encryption.Keyring
	Logf func(format string, args ...any)
}

// FetchResult says what was fetched.
type FetchResult struct {
	// Skipped: SkipIfExists existed and nothing was done.
	Skipped bool
	// Manifest is nil for a snapshot stored without one (uploaded by hand).
	Manifest *Manifest
	// Location of the object read; Path written.
	Location, Path string
	// SHA256 (hex) and Size of the stored object; Scan of the snapshot written.
	SHA256 string
	Size   int64
	Scan   ScanResult
}

// Fetch writes the snapshot of backup key to outPath, for etcdutl snapshot restore. It reads the
// manifest if there is one, refuses a snapshot newer than MaxMinor, streams the object to
// outPath.partial while hashing and decompressing it, checks the stored object's sha256 and
// etcd's own hash of the database, and only then renames it to outPath.
//
// key is a backup's key (with key/manifest.json), or a snapshot object's own key.
func Fetch(ctx context.Context, store objstore.Store, key, outPath string, opts FetchOptions) (FetchResult, error) {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.SkipIfExists != "" {
		if _, err := os.Stat(opts.SkipIfExists); err == nil {
			opts.Logf("%s exists: nothing to restore", opts.SkipIfExists)
			return FetchResult{Skipped: true}, nil
		}
	}
	src, err := locate(ctx, store, key)
	if err != nil {
		return FetchResult{}, err
	}
	res := FetchResult{Manifest: src.manifest, Location: store.Location(src.object), Path: outPath}
	if m := src.manifest; m != nil {
		if err := checkMinor(m.StorageVersion, m.EtcdVersion, opts.MaxMinor); err != nil {
			return FetchResult{}, err
		}
	}
	want, wantFrom := strings.ToLower(opts.ExpectSHA256), "--expect-sha256"
	if want == "" && src.manifest != nil {
		want, wantFrom = src.manifest.SHA256, "the manifest"
	}
	if src.encryption != "" && opts.Keys == nil {
		return FetchResult{}, fmt.Errorf("%s is sealed (%s) under key %s: give the encryption key (the destination's encryption.keySecretRef)",
			res.Location, src.encryption, orUnrecorded(src.keyID))
	}
	opts.Logf("fetching %s (%s%s) to %s", res.Location, src.compression, sealedNote(src), outPath)
	res.SHA256, res.Size, res.Scan, err = download(ctx, store, src, outPath+".partial", opts.Keys)
	// A damaged object usually fails decompression first; the hash mismatch says more.
	if want != "" && res.SHA256 != "" && res.SHA256 != want {
		err = fmt.Errorf("sha256 of %s is %s, but %s says %s: the object is corrupt or not the one expected", res.Location, res.SHA256, wantFrom, want)
	}
	if err == nil {
		err = checkFetched(res, opts.MaxMinor)
	}
	if err == nil {
		if err = os.Rename(outPath+".partial", outPath); err == nil {
			err = syncDir(filepath.Dir(outPath))
		}
	}
	if err != nil {
		_ = os.Remove(outPath + ".partial")
		return FetchResult{}, err
	}
	opts.Logf("fetched revision %d (%d bytes, sha256 %s)", res.Scan.Revision, res.Scan.RawSize, res.SHA256)
	return res, nil
}

// checkFetched holds the snapshot against its manifest, or against MaxMinor when there is none.
func checkFetched(res FetchResult, maxMinor string) error {
	m := res.Manifest
	if m == nil {
		return checkMinor(res.Scan.StorageVersion, "", maxMinor)
	}
	if res.Scan.Revision != m.Revision || res.Scan.RawSize != m.RawSize {
		return fmt.Errorf("%s holds revision %d in %d bytes, its manifest says revision %d in %d bytes: they do not belong together",
			res.Location, res.Scan.Revision, res.Scan.RawSize, m.Revision, m.RawSize)
	}
	return nil
}

type source struct {
	object      string
	compression Compression
	encryption  Encryption
	keyID       string
	manifest    *Manifest
}

func sealedNote(src source) string {
	if src.encryption == "" {
		return ""
	}
	return ", sealed under " + orUnrecorded(src.keyID)
}

func orUnrecorded(keyID string) string {
	if keyID == "" {
		return "an unrecorded key"
	}
	return keyID
}

// locate finds the snapshot object: the manifest's, else snapshot.db.zst or snapshot.db under
// key, else key itself; compression from the manifest, the object's metadata or its name.
func locate(ctx context.Context, store objstore.Store, key string) (source, error) {
	m, err := ReadManifest(ctx, store, key)
	switch {
	case err == nil:
		return source{object: key + "/" + m.Object, compression: m.Compression, encryption: m.Encryption, keyID: m.KeyID, manifest: &m}, nil
	case !errors.Is(err, objstore.ErrNotFound):
		return source{}, err
	}
	zst, raw := key+"/"+CompressionZstd.ObjectName(), key+"/"+CompressionNone.ObjectName()
	for _, obj := range []string{zst, raw, zst + sealedSuffix, raw + sealedSuffix, key} {
		info, err := store.Stat(ctx, obj)
		if errors.Is(err, objstore.ErrNotFound) {
			continue
		}
		if err != nil {
			return source{}, err
		}
		src := source{object: obj, encryption: Encryption(info.Metadata[metaEncryption]), keyID: info.Metadata[metaKeyID]}
		if src.encryption == "" && strings.HasSuffix(obj, sealedSuffix) {
			src.encryption = EncryptionAge
		}
		name := strings.TrimSuffix(obj, sealedSuffix)
		c := Compression(info.Metadata["compression"])
		if c == "" {
			c = CompressionNone
			if strings.HasSuffix(name, ".zst") {
				c = CompressionZstd
			}
		}
		if _, err := ParseCompression(string(c)); err != nil {
			return source{}, fmt.Errorf("%s: %w", store.Location(obj), err)
		}
		src.compression = c
		return src, nil
	}
	return source{}, fmt.Errorf("no snapshot at %s: neither a manifest nor a snapshot object: %w", store.Location(key), objstore.ErrNotFound)
}

// download streams the object into path: stored bytes -> sha256 -> unsealing -> decompression
// -> scanner and file. The file is fsynced before the caller renames it. The object's sha256 is
// returned whenever the object could be read to its end, even if its content was refused.
func download(ctx context.Context, store objstore.Store, src source, path string, keys *encryption.Keyring) (sum string, size int64, scan ScanResult, err error) {
	rc, _, err := store.Get(ctx, src.object)
	if err != nil {
		return "", 0, ScanResult{}, err
	}
	defer func() { _ = rc.Close() }()
	stored := &hashCounter{h: sha256.New()}
	in := bufio.NewReader(io.TeeReader(rc, stored))
	var r io.Reader = in
	if head, _ := in.Peek(len(sealedMagic)); src.encryption == "" && encryption.Sealed(head) {
		// Sealed but not marked so (uploaded by hand, metadata lost): refuse it as what it is.
		src.encryption = EncryptionAge
		if keys == nil {
			err = fmt.Errorf("%s is sealed with age but neither its manifest nor its metadata say so: give the encryption key", store.Location(src.object))
		}
	}
	if err == nil && src.encryption != "" {
		if r, err = keys.Open(in, src.keyID); err != nil {
			err = fmt.Errorf("opening %s: %w", store.Location(src.object), err)
		}
	}
	if err == nil {
		if scan, err = decodeTo(r, src.compression, path); err != nil {
			err = fmt.Errorf("reading %s: %w", store.Location(src.object), err)
		}
	}
	// Hash what decompression did not need (trailing bytes, or the rest after an error) so the
	// sum covers the whole object.
	if _, cerr := io.Copy(io.Discard, in); cerr != nil {
		return "", 0, ScanResult{}, errors.Join(err, cerr)
	}
	return hex.EncodeToString(stored.h.Sum(nil)), stored.n, scan, err
}

// sealedMagic is as much of an object's start as encryption.Sealed needs.
const sealedMagic = "age-encryption.org/"

// decodeTo decompresses r into the file at path, scanning the snapshot on the way.
func decodeTo(r io.Reader, c Compression, path string) (ScanResult, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return ScanResult{}, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return ScanResult{}, err
	}
	defer func() { _ = f.Close() }()
	if c == CompressionZstd {
		dec, err := newDecoder(r)
		if err != nil {
			return ScanResult{}, err
		}
		defer dec.Close()
		r = dec
	}
	scanner := NewScanner()
	if _, err := io.CopyBuffer(io.MultiWriter(f, scanner), r, make([]byte, 64<<10)); err != nil {
		return ScanResult{}, err
	}
	if err := f.Sync(); err != nil {
		return ScanResult{}, err
	}
	scan, err := scanner.Result()
	if err != nil {
		return ScanResult{}, err
	}
	return scan, f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}
