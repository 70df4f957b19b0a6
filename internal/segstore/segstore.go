// Package segstore keeps a cluster's continuous-backup segments in an object store next to its
// snapshot backups (under <namespace>/<cluster>/, segments in segment.Dir): it lists bases and
// segments for package pitr, uploads a segment compressed and optionally sealed, and opens a
// chain of segments as one stream of revisions for package replay.
package segstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/etcd-steward/steward/internal/encryption"
	"github.com/etcd-steward/steward/internal/objstore"
	"github.com/etcd-steward/steward/internal/pitr"
	"github.com/etcd-steward/steward/internal/segment"
	"github.com/etcd-steward/steward/internal/snapshot"
)

// Encodings of a segment object, as its name lists them.
const (
	EncodingZstd = "zst"
	EncodingAge  = "age"
)

// MetaKeyID is the object metadata naming the key a sealed segment was sealed under.
const MetaKeyID = "keyid"

// Dir is where a cluster's segments live: <prefix>/_segments/ for prefix <namespace>/<cluster>.
func Dir(prefix string) string { return prefix + "/" + segment.Dir + "/" }

// List reads the bases (finished backups: their manifests) and segments of a cluster.
func List(ctx context.Context, store objstore.Store, prefix string) ([]pitr.Base, []pitr.Segment, error) {
	objs, err := store.List(ctx, prefix+"/")
	if err != nil {
		return nil, nil, err
	}
	var bases []pitr.Base
	var segs []pitr.Segment
	for _, o := range objs {
		rest := strings.TrimPrefix(o.Key, prefix+"/")
		if strings.HasPrefix(rest, segment.Dir+"/") {
			p, err := segment.ParseName(rest)
			if err != nil {
				continue // not ours (a partial upload never shows: objstore lists whole objects)
			}
			segs = append(segs, pitr.Segment{Key: o.Key, After: p.After, Last: p.Last, LastStamp: p.LastStamp})
			continue
		}
		backup, name, ok := strings.Cut(rest, "/")
		if !ok || name != snapshot.ManifestName {
			continue
		}
		m, err := snapshot.ReadManifest(ctx, store, prefix+"/"+backup)
		if errors.Is(err, objstore.ErrNotFound) {
			continue // deleted while listing
		}
		if err != nil {
			return nil, nil, err
		}
		bases = append(bases, pitr.Base{Name: backup, Revision: m.Revision, Time: m.CompletedAt, ClusterID: m.ClusterID})
	}
	return bases, segs, nil
}

// Put uploads one closed segment's bytes (segment.Writer's output): zstd-compressed, then sealed
// when keys is set. The object appears whole or not at all (objstore.Store.Put).
func Put(ctx context.Context, store objstore.Store, prefix string, seg []byte, t segment.Trailer, after int64, keys *encryption.Keyring) (string, error) {
	encodings := []string{EncodingZstd}
	meta := map[string]string{}
	if keys != nil {
		encodings = append(encodings, EncodingAge)
		meta[MetaKeyID] = keys.KeyID()
	}
	var out bytes.Buffer
	var w io.Writer = &out
	var sealer io.WriteCloser
	if keys != nil {
		var err error
		if sealer, err = keys.Seal(&out); err != nil {
			return "", err
		}
		w = sealer
	}
	enc, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		return "", err
	}
	if _, err := enc.Write(seg); err != nil {
		return "", err
	}
	if err := enc.Close(); err != nil {
		return "", err
	}
	if sealer != nil {
		if err := sealer.Close(); err != nil {
			return "", err
		}
	}
	key := Dir(prefix) + segment.Name(after, t.Last, t.LastStamp, encodings...)
	_, err = store.Put(ctx, key, &out, meta)
	return key, err
}

// Open reads one segment object, undoing its encodings. A sealed segment without keys, or under a
// key keys does not hold, is a clear error.
func Open(ctx context.Context, store objstore.Store, key string, keys *encryption.Keyring) (*segment.Reader, io.Closer, error) {
	p, err := segment.ParseName(key)
	if err != nil {
		return nil, nil, err
	}
	rc, info, err := store.Get(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	var r io.Reader = rc
	closers := []func(){func() { _ = rc.Close() }}
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	for i := len(p.Encodings) - 1; i >= 0; i-- {
		switch p.Encodings[i] {
		case EncodingAge:
			if keys == nil {
				closeAll()
				return nil, nil, fmt.Errorf("segment %s is sealed under %s: give the encryption key Secret", store.Location(key), info.Metadata[MetaKeyID])
			}
			if r, err = keys.Open(r, info.Metadata[MetaKeyID]); err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("segment %s: %w", store.Location(key), err)
			}
		case EncodingZstd:
			d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			closers = append(closers, d.Close)
			r = d
		default:
			closeAll()
			return nil, nil, fmt.Errorf("segment %s: unknown encoding %q", store.Location(key), p.Encodings[i])
		}
	}
	sr, err := segment.NewReader(r)
	if err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("segment %s: %w", store.Location(key), err)
	}
	if h := sr.Header(); h.After != p.After {
		closeAll()
		return nil, nil, fmt.Errorf("segment %s continues from revision %d, its name says %d", store.Location(key), h.After, p.After)
	}
	return sr, closerFunc(closeAll), nil
}

type closerFunc func()

func (f closerFunc) Close() error { f(); return nil }
