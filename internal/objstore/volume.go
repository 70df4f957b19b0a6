package objstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Volume stores objects as files under a root directory (a mounted PersistentVolume). Metadata
// and ETags live in a parallel tree under <root>/.steward-meta/, so an object's file is exactly
// its bytes and can be copied out with any tool.
type Volume struct {
	root string
}

const (
	partialSuffix = ".partial"
	metaDir       = ".steward-meta"
)

// NewVolume returns the store rooted at dir, which must exist: a missing mount should fail the
// backup, not silently write into the container's own file system.
func NewVolume(dir string) (*Volume, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("backup volume: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("backup volume %s is not a directory", abs)
	}
	return &Volume{root: abs}, nil
}

// volumeMeta is the sidecar of one object.
type volumeMeta struct {
	ETag     string            `json:"etag"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

func (v *Volume) paths(key string) (file, meta string, err error) {
	if err := CheckKey(key); err != nil {
		return "", "", err
	}
	if strings.HasSuffix(key, partialSuffix) || key == metaDir || strings.HasPrefix(key, metaDir+"/") {
		return "", "", fmt.Errorf("object key %q is reserved by the volume store", key)
	}
	return filepath.Join(v.root, filepath.FromSlash(key)), filepath.Join(v.root, metaDir, filepath.FromSlash(key)+".json"), nil
}

// Location is file://<root>/<key>.
func (v *Volume) Location(key string) string {
	return "file://" + filepath.ToSlash(filepath.Join(v.root, filepath.FromSlash(key)))
}

// Put writes <file>.partial, fsyncs it, writes the metadata sidecar the same way, then renames
// the file into place and fsyncs the directory: after a crash the final name holds either the
// whole object or nothing.
func (v *Volume) Put(ctx context.Context, key string, r io.Reader, meta map[string]string) (ObjectInfo, error) {
	file, metaFile, err := v.paths(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	h := sha256.New()
	if err := writeAtomically(file, func(w io.Writer) error {
		_, err := io.Copy(io.MultiWriter(w, h), ctxReader{ctx, r})
		return err
	}, false); err != nil {
		return ObjectInfo{}, err
	}
	// The final rename happens after the sidecar is in place: an object never lacks metadata.
	defer func() { _ = os.Remove(file + partialSuffix) }()
	vm := volumeMeta{ETag: hex.EncodeToString(h.Sum(nil)), Metadata: lowerKeys(meta)}
	if err := writeAtomically(metaFile, func(w io.Writer) error { return json.NewEncoder(w).Encode(vm) }, true); err != nil {
		return ObjectInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return ObjectInfo{}, err
	}
	if err := os.Rename(file+partialSuffix, file); err != nil {
		return ObjectInfo{}, err
	}
	if err := syncDir(filepath.Dir(file)); err != nil {
		return ObjectInfo{}, err
	}
	return v.Stat(ctx, key)
}

// writeAtomically writes path+".partial" with fill and fsyncs it; with rename it also moves it
// to path and fsyncs the directory. A failure removes the partial file.
func writeAtomically(path string, fill func(io.Writer) error, rename bool) (err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + partialSuffix
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err = fill(f); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if rename {
		if err = os.Rename(tmp, path); err != nil {
			return err
		}
		err = syncDir(filepath.Dir(path))
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}

// Get opens the object's file.
func (v *Volume) Get(ctx context.Context, key string) (io.ReadCloser, ObjectInfo, error) {
	file, _, err := v.paths(key)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	f, err := os.Open(file)
	if missing(err) {
		return nil, ObjectInfo{}, fmt.Errorf("%s: %w", v.Location(key), ErrNotFound)
	}
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	info, err := v.Stat(ctx, key)
	if err != nil {
		_ = f.Close()
		return nil, ObjectInfo{}, err
	}
	return f, info, nil
}

// Stat describes the object from its file and sidecar.
func (v *Volume) Stat(_ context.Context, key string) (ObjectInfo, error) {
	file, metaFile, err := v.paths(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	st, err := os.Stat(file)
	if missing(err) || (err == nil && st.IsDir()) {
		return ObjectInfo{}, fmt.Errorf("%s: %w", v.Location(key), ErrNotFound)
	}
	if err != nil {
		return ObjectInfo{}, err
	}
	info := ObjectInfo{Key: key, Size: st.Size(), LastModified: st.ModTime(), Metadata: map[string]string{}}
	// A file copied in by hand has no sidecar: it is still an object, just without metadata.
	if b, err := os.ReadFile(metaFile); err == nil {
		var vm volumeMeta
		if err := json.Unmarshal(b, &vm); err != nil {
			return ObjectInfo{}, fmt.Errorf("metadata of %s: %w", v.Location(key), err)
		}
		info.ETag = vm.ETag
		if vm.Metadata != nil {
			info.Metadata = vm.Metadata
		}
	}
	return info, nil
}

// Delete removes the object, its sidecar, and directories left empty (up to the root).
func (v *Volume) Delete(_ context.Context, key string) error {
	file, metaFile, err := v.paths(key)
	if err != nil {
		return err
	}
	for _, p := range []string{file, metaFile} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		v.pruneEmpty(filepath.Dir(p))
	}
	return nil
}

func (v *Volume) pruneEmpty(dir string) {
	stop := map[string]bool{v.root: true, filepath.Join(v.root, metaDir): true}
	for !stop[dir] && strings.HasPrefix(dir, v.root+string(filepath.Separator)) {
		if os.Remove(dir) != nil { // not empty (or gone): stop climbing
			return
		}
		dir = filepath.Dir(dir)
	}
}

// List walks the root, skipping the metadata tree and partial files.
func (v *Volume) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	var keys []string
	err := filepath.WalkDir(v.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(v.root, p)
		key := filepath.ToSlash(rel)
		switch {
		case d.IsDir() && key == metaDir:
			return filepath.SkipDir
		case d.IsDir() && key != "." && !strings.HasPrefix(key, prefix) && !strings.HasPrefix(prefix, key+"/"):
			return filepath.SkipDir // nothing below can match
		case d.IsDir(), strings.HasSuffix(key, partialSuffix), !strings.HasPrefix(key, prefix):
			return nil
		}
		keys = append(keys, key)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(keys)
	out := make([]ObjectInfo, 0, len(keys))
	for _, k := range keys {
		info, err := v.Stat(ctx, k)
		if errors.Is(err, ErrNotFound) {
			continue // deleted while listing
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// missing: no such file, or a path through a file ("a.db/manifest.json" when a.db is an object).
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// ctxReader stops a copy once ctx is done, so a cancelled backup does not finish writing.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
