package keyspace

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-steward/steward/internal/etcdtest"
)

func client(t *testing.T) *clientv3.Client {
	t.Helper()
	c := etcdtest.Start(t, 1)
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.ClientURLs(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// The digest at a past revision stays what it was at that revision while the keyspace moves on; it
// is the same in one page or many; and every field of a key counts: value, revisions, version,
// lease.
func TestDigest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli := client(t)
	for i := range 40 {
		if _, err := cli.Put(ctx, fmt.Sprintf("k%02d", i), strings.Repeat("v", i)); err != nil {
			t.Fatal(err)
		}
	}
	lease, err := cli.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "leased", "x", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	at, err := Read(ctx, cli, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if at.Keys != 41 || at.Revision == 0 {
		t.Fatalf("digest %+v, want 41 keys at a revision", at)
	}
	paged, err := Read(ctx, cli, at.Revision, 7)
	if err != nil {
		t.Fatal(err)
	}
	if msg := Compare(at, paged); msg != "" {
		t.Errorf("in pages of 7: %s", msg)
	}

	// Changes after the revision do not touch the digest read at it; each changes the head's.
	for _, change := range []func() error{
		func() error { _, err := cli.Put(ctx, "k05", "other"); return err },                // value
		func() error { _, err := cli.Put(ctx, "k06", strings.Repeat("v", 6)); return err }, // same value: mod revision, version
		func() error { _, err := cli.Delete(ctx, "k07"); return err },
		func() error { _, err := cli.Put(ctx, "leased", "x"); return err }, // the lease dropped
	} {
		before, err := Read(ctx, cli, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := change(); err != nil {
			t.Fatal(err)
		}
		after, err := Read(ctx, cli, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if Compare(before, after) == "" {
			t.Errorf("a change left the digest as it was: %+v", after)
		}
		again, err := Read(ctx, cli, at.Revision, 5)
		if err != nil {
			t.Fatal(err)
		}
		if msg := Compare(at, again); msg != "" {
			t.Errorf("the digest at revision %d moved: %s", at.Revision, msg)
		}
	}

	// A compacted revision is an error, never a digest of something else.
	if _, err := cli.Compact(ctx, at.Revision+2); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(ctx, cli, at.Revision, 0); err == nil {
		t.Error("a digest at a compacted revision")
	}
}
