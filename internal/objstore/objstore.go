// Package objstore is where backups live: S3-compatible object storage or files under a mounted
// volume, behind one small interface. Objects are written by streaming (their size is not known
// in advance: a snapshot is compressed on its way out) with bounded memory, and a failed write
// never leaves an object under its final name, so whatever is listed is complete.
package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
)

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key          string
	Size         int64
	ETag         string
	LastModified time.Time
	// Metadata is the user metadata given to Put, keys in lower case (S3 capitalises them).
	Metadata map[string]string
}

// Store holds objects under string keys ("a/b/c", no leading slash).
type Store interface {
	// Put streams r into the object key. The object appears only once r returned io.EOF and
	// everything was stored: an error from r, ctx or the store leaves no object.
	Put(ctx context.Context, key string, r io.Reader, meta map[string]string) (ObjectInfo, error)
	// Get opens the object for reading; the caller closes it. A missing object is ErrNotFound.
	Get(ctx context.Context, key string) (io.ReadCloser, ObjectInfo, error)
	// Stat describes the object. A missing object is ErrNotFound.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// Delete removes the object; a missing object is not an error.
	Delete(ctx context.Context, key string) error
	// List returns the objects whose keys start with prefix, in key order.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	// Location names the object for people and status fields: s3://bucket/key, file:///path.
	Location(key string) string
}

// ErrNotFound is returned (wrapped) for an object that does not exist.
var ErrNotFound = errors.New("object not found")

// CheckKey refuses keys that could escape a prefix or a root directory, or that S3 and a file
// system would store differently: empty, absolute, with empty, "." or ".." segments, or with a
// backslash or NUL.
func CheckKey(key string) error {
	switch {
	case key == "":
		return errors.New("empty object key")
	case strings.HasPrefix(key, "/"), strings.HasSuffix(key, "/"):
		return fmt.Errorf("object key %q: no leading or trailing slash", key)
	case strings.ContainsAny(key, "\\\x00"):
		return fmt.Errorf("object key %q: no backslash or NUL", key)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("object key %q: empty, '.' and '..' segments are not allowed", key)
		}
	}
	if path.Clean(key) != key {
		return fmt.Errorf("object key %q is not clean", key)
	}
	return nil
}

func lowerKeys(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[strings.ToLower(k)] = v
	}
	return out
}
