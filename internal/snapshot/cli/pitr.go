package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/etcd-steward/steward/internal/encryption"
	"github.com/etcd-steward/steward/internal/objstore"
	"github.com/etcd-steward/steward/internal/pitr"
	"github.com/etcd-steward/steward/internal/replay"
	"github.com/etcd-steward/steward/internal/segstore"
	"github.com/etcd-steward/steward/internal/snapshot"
)

// pointInTime are fetch's flags for a point-in-time restore: instead of one backup, the newest base
// of a cluster's chain at or before the target, replayed up to it.
type pointInTime struct {
	prefix     string
	toRevision int64
	toTime     string
}

func (p *pointInTime) bind(fs *flag.FlagSet) {
	fs.StringVar(&p.prefix, "pitr-prefix", "", "restore to a point from the backups and segments of this cluster (<namespace>/<cluster>)")
	fs.Int64Var(&p.toRevision, "to-revision", 0, "with --pitr-prefix: the revision to restore")
	fs.StringVar(&p.toTime, "to-time", "", "with --pitr-prefix: restore the last revision stamped at or before this time (RFC 3339)")
}

func (p *pointInTime) set() bool { return p.prefix != "" || p.toRevision != 0 || p.toTime != "" }

// target resolves the flags to a revision, reading the one segment a time falls inside.
func (p *pointInTime) target(ctx context.Context, store objstore.Store, keys *encryption.Keyring, bases []pitr.Base, segs []pitr.Segment) (int64, map[string]any, error) {
	switch {
	case p.prefix == "":
		return 0, nil, usageError("--to-revision and --to-time need --pitr-prefix")
	case (p.toRevision != 0) == (p.toTime != ""):
		return 0, nil, usageError("give exactly one of --to-revision and --to-time with --pitr-prefix")
	case p.toRevision < 0:
		return 0, nil, usageError("--to-revision must be positive")
	case p.toRevision > 0:
		return p.toRevision, map[string]any{"target": fmt.Sprintf("revision %d", p.toRevision)}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, p.toTime)
	if err != nil {
		return 0, nil, usageError(fmt.Sprintf("--to-time %q: want RFC 3339 (2026-12-04T14:02:10Z)", p.toTime))
	}
	rev, inside, err := pitr.ForTime(bases, segs, t)
	if err != nil {
		return 0, nil, err
	}
	if inside != nil {
		stamps, err := segstore.Stamps(ctx, store, inside.Key, keys)
		if err != nil {
			return 0, nil, err
		}
		rev = pitr.Refine(rev, stamps, t)
	}
	return rev, map[string]any{"target": "time " + t.UTC().Format(time.RFC3339Nano), "timeRevision": rev}, nil
}

// fetchPointInTime writes to c.out the snapshot of the cluster at the target: the base fetched and
// checked as any backup, then the chain replayed onto it (package replay).
func (c *fetchCmd) fetchPointInTime(ctx context.Context, store objstore.Store, logf func(string, ...any)) (map[string]any, error) {
	if c.skipIfExists != "" {
		if _, err := os.Stat(c.skipIfExists); err == nil {
			logf("%s exists: nothing to restore", c.skipIfExists)
			return map[string]any{"skipped": true, "path": c.skipIfExists}, nil
		}
	}
	bases, segs, err := segstore.List(ctx, store, c.pitr.prefix)
	if err != nil {
		return nil, err
	}
	rev, res, err := c.pitr.target(ctx, store, c.dest.keys, bases, segs)
	if err != nil {
		return nil, err
	}
	ch := chain{store: store, keys: c.dest.keys, prefix: c.pitr.prefix, maxMinor: c.maxMinor, logf: logf}
	out, _, err := ch.replayTo(ctx, bases, segs, rev, c.out)
	if err != nil {
		return nil, err
	}
	for k, v := range out {
		res[k] = v
	}
	return res, nil
}

// chain is one cluster's backups and segments in a store.
type chain struct {
	store    objstore.Store
	keys     *encryption.Keyring
	prefix   string
	maxMinor string
	logf     func(string, ...any)
}

// replayTo writes to out the snapshot at rev: the newest base at or before it, fetched and checked
// as any backup, with the segments after it replayed up to rev. It returns the result's fields.
func (ch chain) replayTo(ctx context.Context, bases []pitr.Base, segs []pitr.Segment, rev int64, out string) (map[string]any, replay.Result, error) {
	plan, err := pitr.ForRevision(bases, segs, rev)
	if err != nil {
		return nil, replay.Result{}, err
	}
	ch.logf("restoring revision %d: base %s (revision %d), %d revisions from %d segments", rev, plan.Base.Name,
		plan.Base.Revision, plan.Replayed(), len(plan.Segments))
	work := out + ".pitr"
	fr, err := snapshot.Fetch(ctx, ch.store, ch.prefix+"/"+plan.Base.Name, work, snapshot.FetchOptions{MaxMinor: ch.maxMinor, Keys: ch.keys, Logf: ch.logf})
	if err != nil {
		return nil, replay.Result{}, err
	}
	segments := segstore.NewChain(ctx, ch.store, ch.keys, plan)
	defer func() { _ = segments.Close() }()
	start := time.Now()
	rr, err := replay.Snapshot(ctx, work, segments, replay.Options{To: rev})
	if err != nil {
		_ = os.Remove(work)
		return nil, rr, fmt.Errorf("replaying onto base %s: %w", plan.Base.Name, err)
	}
	took := time.Since(start)
	if err := os.Rename(work, out); err != nil {
		return nil, rr, err
	}
	ch.logf("replayed revisions %d-%d (%d events) in %s", rr.From+1, rr.To, rr.Events, took.Round(time.Millisecond))
	res := map[string]any{"skipped": false, "path": out, "base": plan.Base.Name, "baseRevision": plan.Base.Revision,
		"revision": rr.To, "replayed": rr.Revisions, "events": rr.Events,
		"leasesGranted": rr.LeasesGranted, "leasesUnknownTTL": rr.LeasesUnknownTTL, "replaySeconds": took.Seconds()}
	if fr.Manifest != nil {
		res["clusterID"], res["etcdVersion"] = fr.Manifest.ClusterID, fr.Manifest.EtcdVersion
	}
	return res, rr, nil
}
