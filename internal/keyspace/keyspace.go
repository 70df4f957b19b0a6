// Package keyspace digests a cluster's whole keyspace at one revision: every key with its value,
// create and mod revision, version and lease, read in pages with a range, so two clusters (a live
// one read at a past revision, and one restored to that revision) can be compared whatever their
// compaction histories. etcd's HashKV cannot do that: it hashes the history since the last
// compaction, which a restore does not share with its source.
package keyspace

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Digest of a keyspace.
type Digest struct {
	// Revision read at (the header's revision when read at the head).
	Revision int64 `json:"revision"`
	Keys     int64 `json:"keys"`
	// SHA256 (hex) over every key in key order, each field length-prefixed.
	SHA256 string `json:"sha256"`
}

// DefaultPage is the keys a page reads: small enough that a page of large values stays far under
// the gRPC message limit a client sets by default.
const DefaultPage = 500

// Read digests the keyspace at rev (0: the head) in pages of page keys (DefaultPage when 0). Every
// page reads the same revision, so the digest is one consistent view even while writes go on.
func Read(ctx context.Context, cli *clientv3.Client, rev int64, page int64) (Digest, error) {
	if page <= 0 {
		page = DefaultPage
	}
	h := sha256.New()
	d := Digest{Revision: rev}
	from := "\x00"
	for {
		opts := []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithLimit(page), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
		if d.Revision > 0 {
			opts = append(opts, clientv3.WithRev(d.Revision))
		}
		resp, err := cli.Get(ctx, from, opts...)
		if err != nil {
			return Digest{}, fmt.Errorf("reading the keyspace at revision %d from %q: %w", d.Revision, from, err)
		}
		if d.Revision == 0 {
			d.Revision = resp.Header.Revision // later pages read the first page's revision
		}
		for _, kv := range resp.Kvs {
			Add(h, kv)
		}
		d.Keys += int64(len(resp.Kvs))
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	d.SHA256 = hex.EncodeToString(h.Sum(nil))
	return d, nil
}

// Add writes one key-value into h as Read does.
func Add(h hash.Hash, kv *mvccpb.KeyValue) {
	var n [8]byte
	field := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	num := func(v int64) {
		binary.BigEndian.PutUint64(n[:], uint64(v))
		h.Write(n[:])
	}
	field(kv.Key)
	field(kv.Value)
	num(kv.CreateRevision)
	num(kv.ModRevision)
	num(kv.Version)
	num(kv.Lease)
}

// Compare says how two digests differ ("" when equal).
func Compare(want, got Digest) string {
	switch {
	case want.Keys != got.Keys:
		return fmt.Sprintf("%d keys, the source had %d at revision %d", got.Keys, want.Keys, want.Revision)
	case want.SHA256 != got.SHA256:
		return fmt.Sprintf("the %d keys differ from the source's at revision %d (digest %.12s, the source's %.12s)", got.Keys, want.Revision, got.SHA256, want.SHA256)
	}
	return ""
}
