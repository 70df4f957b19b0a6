package objstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func tctx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// failingReader yields n pseudo-random bytes, then fails: a snapshot stream that breaks midway.
type failingReader struct {
	left int64
	err  error
	seed byte
}

var errBroken = errors.New("stream broke")

func (f *failingReader) Read(p []byte) (int, error) {
	if f.left <= 0 {
		return 0, f.err
	}
	if int64(len(p)) > f.left {
		p = p[:f.left]
	}
	for i := range p {
		f.seed = f.seed*31 + 7
		p[i] = f.seed
	}
	f.left -= int64(len(p))
	return len(p), nil
}

func newVolume(t *testing.T) (*Volume, string) {
	t.Helper()
	dir := t.TempDir()
	v, err := NewVolume(dir)
	if err != nil {
		t.Fatal(err)
	}
	return v, dir
}

func TestVolumeRoundTrip(t *testing.T) {
	ctx := tctx(t)
	v, dir := newVolume(t)
	data := bytes.Repeat([]byte("etcd snapshot bytes "), 100_000)
	info, err := v.Put(ctx, "ns/demo/b1/snapshot.db.zst", bytes.NewReader(data), map[string]string{"Compression": "zstd"})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if info.Size != int64(len(data)) || info.ETag != hex.EncodeToString(sum[:]) || info.Metadata["compression"] != "zstd" {
		t.Errorf("Put returned %+v", info)
	}
	if _, err := v.Put(ctx, "ns/demo/b1/manifest.json", strings.NewReader("{}"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Put(ctx, "ns/demo/b2/manifest.json", strings.NewReader("{}"), nil); err != nil {
		t.Fatal(err)
	}

	rc, got, err := v.Get(ctx, "ns/demo/b1/snapshot.db.zst")
	if err != nil {
		t.Fatal(err)
	}
	back, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil || !bytes.Equal(back, data) || got.Metadata["compression"] != "zstd" {
		t.Fatalf("Get: %v, %d bytes, %+v", err, len(back), got.Metadata)
	}
	// The object's file is exactly its bytes, under the key's path.
	if raw, err := os.ReadFile(filepath.Join(dir, "ns", "demo", "b1", "snapshot.db.zst")); err != nil || !bytes.Equal(raw, data) {
		t.Errorf("file on disk: %v", err)
	}
	if loc := v.Location("ns/demo/b1/manifest.json"); loc != "file://"+filepath.ToSlash(dir)+"/ns/demo/b1/manifest.json" {
		t.Errorf("Location = %s", loc)
	}

	list, err := v.List(ctx, "ns/demo/b1/")
	if err != nil {
		t.Fatal(err)
	}
	if keys := keysOf(list); keys != "ns/demo/b1/manifest.json,ns/demo/b1/snapshot.db.zst" {
		t.Errorf("List(b1/) = %s", keys)
	}
	if list, _ := v.List(ctx, "ns/demo/b"); keysOf(list) != "ns/demo/b1/manifest.json,ns/demo/b1/snapshot.db.zst,ns/demo/b2/manifest.json" {
		t.Errorf("List(b) = %s", keysOf(list))
	}

	for _, k := range []string{"ns/demo/b1/snapshot.db.zst", "ns/demo/b1/manifest.json", "ns/demo/b1/manifest.json"} {
		if err := v.Delete(ctx, k); err != nil {
			t.Fatalf("Delete %s (missing is fine): %v", k, err)
		}
	}
	if _, err := v.Stat(ctx, "ns/demo/b1/manifest.json"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Stat after Delete: %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ns", "demo", "b1")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the emptied backup directory is still there: %v", err)
	}
	if list, _ := v.List(ctx, ""); keysOf(list) != "ns/demo/b2/manifest.json" {
		t.Errorf("List() after deletes = %s", keysOf(list))
	}
}

func keysOf(list []ObjectInfo) string {
	var ks []string
	for _, o := range list {
		ks = append(ks, o.Key)
	}
	return strings.Join(ks, ",")
}

// A reader that fails midway, or a cancelled context, leaves neither the object nor its
// .partial file; a .partial left by a crash is never listed.
func TestVolumeFailedPutLeavesNothing(t *testing.T) {
	ctx := tctx(t)
	v, dir := newVolume(t)
	_, err := v.Put(ctx, "a/snapshot.db", &failingReader{left: 3 << 20, err: errBroken}, nil)
	if !errors.Is(err, errBroken) {
		t.Fatalf("Put = %v, want the reader's error", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := v.Put(cancelled, "a/other.db", strings.NewReader("x"), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with a cancelled context = %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a", "crashed.db.partial"), []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	list, err := v.List(ctx, "")
	if err != nil || len(list) != 0 {
		t.Fatalf("List after failed puts = %s, %v; want nothing", keysOf(list), err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "a"))
	for _, e := range entries {
		if e.Name() != "crashed.db.partial" {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

func TestVolumeRefusesKeysOutsideTheRoot(t *testing.T) {
	ctx := tctx(t)
	v, _ := newVolume(t)
	for _, k := range []string{"", "/abs", "a/../../etc/passwd", "a//b", "./a", "a/", "x.partial", ".steward-meta/x"} {
		if _, err := v.Put(ctx, k, strings.NewReader("x"), nil); err == nil {
			t.Errorf("Put(%q) accepted", k)
		}
	}
	if _, err := NewVolume(filepath.Join(t.TempDir(), "not-mounted")); err == nil {
		t.Error("NewVolume accepted a missing directory")
	}
}
