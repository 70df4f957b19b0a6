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
	plan, err := pitr.ForRevision(bases, segs, rev)
	if err != nil {
		return nil, err
	}
	logf("restoring revision %d: base %s (revision %d), %d revisions from %d segments", rev, plan.Base.Name,
		plan.Base.Revision, plan.Replayed(), len(plan.Segments))
	work := c.out + ".pitr"
	fr, err := snapshot.Fetch(ctx, store, c.pitr.prefix+"/"+plan.Base.Name, work, snapshot.FetchOptions{MaxMinor: c.maxMinor, Keys: c.dest.keys, Logf: logf})
	if err != nil {
		return nil, err
	}
	chain := segstore.NewChain(ctx, store, c.dest.keys, plan)
	defer func() { _ = chain.Close() }()
	start := time.Now()
	rr, err := replay.Snapshot(ctx, work, chain, replay.Options{To: rev})
	if err != nil {
		_ = os.Remove(work)
		return nil, fmt.Errorf("replaying onto base %s: %w", plan.Base.Name, err)
	}
	took := time.Since(start)
	if err := os.Rename(work, c.out); err != nil {
		return nil, err
	}
	logf("replayed revisions %d-%d (%d events) in %s", rr.From+1, rr.To, rr.Events, took.Round(time.Millisecond))
	res["skipped"], res["path"], res["base"], res["baseRevision"] = false, c.out, plan.Base.Name, plan.Base.Revision
	res["revision"], res["replayed"], res["events"] = rr.To, rr.Revisions, rr.Events
	res["leasesGranted"], res["leasesUnknownTTL"], res["replaySeconds"] = rr.LeasesGranted, rr.LeasesUnknownTTL, took.Seconds()
	if fr.Manifest != nil {
		res["clusterID"], res["etcdVersion"] = fr.Manifest.ClusterID, fr.Manifest.EtcdVersion
	}
	return res, nil
}
