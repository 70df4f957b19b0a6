package cli

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-steward/steward/internal/keyspace"
	"github.com/etcd-steward/steward/internal/objstore"
	"github.com/etcd-steward/steward/internal/pitr"
	"github.com/etcd-steward/steward/internal/segstore"
	"github.com/etcd-steward/steward/internal/snapshot"
)

// verifyPointInTime is the drill of a chain: a revision of the restorable range (--to-revision, or
// --to-random-revision: any the live cluster still holds), replayed and restored into a throwaway
// etcd as a restore would, whose whole keyspace must equal the live cluster's at that revision
// (package keyspace: every key, value, revision, version and lease; HashKV cannot compare the two,
// it hashes the history since the last compaction).
func (c *verifyCmd) verifyPointInTime(ctx context.Context, store objstore.Store, logf func(string, ...any)) (map[string]any, error) {
	if c.live.endpoint == "" {
		return nil, usageError("the point-in-time drill compares the restored keyspace with the live cluster's: give --endpoint")
	}
	if c.random == (c.pitr.toRevision != 0 || c.pitr.toTime != "") {
		return nil, usageError("give exactly one of --to-random-revision, --to-revision and --to-time with --pitr-prefix")
	}
	live, err := c.live.client()
	if err != nil {
		return nil, err
	}
	defer func() { _ = live.Close() }()
	bases, segs, err := segstore.List(ctx, store, c.pitr.prefix)
	if err != nil {
		return nil, err
	}
	var rev int64
	var want keyspace.Digest
	for try := 0; ; try++ {
		if rev, err = c.drillTarget(ctx, store, live, bases, segs); err != nil {
			return nil, err
		}
		want, err = keyspace.Read(ctx, live, rev, 0)
		if errors.Is(err, rpctypes.ErrCompacted) && c.random && try == 0 {
			continue // compacted between the pick and the read: pick again, once
		}
		if err != nil {
			return nil, fmt.Errorf("reading the live keyspace at revision %d: %w", rev, err)
		}
		break
	}
	logf("the live cluster at revision %d: %d keys, digest %.12s", rev, want.Keys, want.SHA256)
	ch := chain{store: store, keys: c.dest.keys, prefix: c.pitr.prefix, maxMinor: c.maxMinor, logf: logf}
	var replayed map[string]any
	r, err := snapshot.Verify(ctx, store, c.pitr.prefix, snapshot.VerifyOptions{MaxMinor: c.maxMinor, Etcd: c.etcd, Etcdutl: c.etcdutl,
		WorkDir: c.workDir, Bump: c.bump, Keys: c.dest.keys, Logf: logf,
		Fetch: func(ctx context.Context, path string) (snapshot.FetchResult, error) {
			res, rr, err := ch.replayTo(ctx, bases, segs, rev, path)
			replayed = res
			return snapshot.FetchResult{Path: path, Scan: snapshot.ScanResult{Revision: rr.To}}, err
		},
		Compare: func(ctx context.Context, restored *clientv3.Client) (string, string) {
			got, err := keyspace.Read(ctx, restored, 0, 0)
			if err != nil {
				return "", fmt.Sprintf("reading the restored keyspace: %v", err)
			}
			if msg := keyspace.Compare(want, got); msg != "" {
				return "", "restored to revision " + fmt.Sprint(rev) + ": " + msg
			}
			return fmt.Sprintf("the keyspace at revision %d equals the live cluster's (%d keys, every revision and lease)", rev, got.Keys), ""
		}})
	if err != nil {
		return nil, err
	}
	extra := map[string]any{"durationSeconds": r.Duration.Seconds(), "targetRevision": rev, "digest": want.SHA256, "liveKeys": want.Keys}
	for _, k := range []string{"base", "baseRevision", "replayed", "replaySeconds"} {
		if v, ok := replayed[k]; ok {
			extra[k] = v
		}
	}
	res, err := withFields(r, extra)
	if err == nil && !r.Verified {
		err = errors.New("verification failed: " + r.Message)
		delete(res, "message")
	}
	return res, err
}

// drillTarget is --to-revision or --to-time, or a random revision the live cluster still holds.
func (c *verifyCmd) drillTarget(ctx context.Context, store objstore.Store, live *clientv3.Client, bases []pitr.Base, segs []pitr.Segment) (int64, error) {
	if !c.random {
		rev, _, err := c.pitr.target(ctx, store, c.dest.keys, bases, segs)
		return rev, err
	}
	compacted, err := compactedRevision(ctx, live)
	if err != nil {
		return 0, err
	}
	return pitr.DrillTarget(pitr.Ranges(bases, segs), compacted, rand.Int64N)
}

// compactedRevision is the live cluster's compacted revision (0 when it never compacted): a watch
// from revision 1 is refused with it.
func compactedRevision(ctx context.Context, cli *clientv3.Client) (int64, error) {
	wctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), 30*time.Second)
	defer cancel()
	resp, ok := <-cli.Watch(wctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(1))
	switch {
	case !ok:
		return 0, fmt.Errorf("asking the live cluster for its compacted revision: %w", wctx.Err())
	case resp.CompactRevision > 0:
		return resp.CompactRevision, nil
	case resp.Err() != nil:
		return 0, fmt.Errorf("asking the live cluster for its compacted revision: %w", resp.Err())
	}
	return 0, nil // events from revision 1: nothing was compacted
}
