package replay

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
)

// Snapshot replays src onto a snapshot file as etcd's Snapshot RPC streams it and `etcdutl
// snapshot restore` reads it: the bbolt database followed by the sha256 of it. The hash is
// checked, the database replayed, and the hash of the replayed database appended in its place,
// so etcdutl's own hash check still guards the rest of the restore.
func Snapshot(ctx context.Context, path string, src Source, opts Options) (Result, error) {
	if err := stripHash(path); err != nil {
		return Result{}, err
	}
	res, err := Apply(ctx, path, src, opts)
	if err != nil {
		return res, err
	}
	return res, appendHash(path)
}

// stripHash checks the trailing sha256 and cuts it off.
func stripHash(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	n := st.Size() - sha256.Size
	if n <= 0 || n%512 != 0 {
		return fmt.Errorf("%s (%d bytes) is not an etcd snapshot: a bbolt file and its %d-byte sha256", path, st.Size(), sha256.Size)
	}
	h := sha256.New()
	if _, err := io.CopyN(h, f, n); err != nil {
		return err
	}
	want := make([]byte, sha256.Size)
	if _, err := io.ReadFull(f, want); err != nil {
		return err
	}
	if !bytes.Equal(h.Sum(nil), want) {
		return errors.New("the snapshot's sha256 does not match its database: it is damaged")
	}
	if err := f.Truncate(n); err != nil {
		return err
	}
	return f.Sync()
}

func appendHash(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if _, err := f.Write(h.Sum(nil)); err != nil {
		return err
	}
	return f.Sync()
}
