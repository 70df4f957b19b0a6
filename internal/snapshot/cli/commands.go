package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/etcd-steward/steward/internal/objstore"
	"github.com/etcd-steward/steward/internal/snapshot"
)

// saveCmd: steward snapshot save.
type saveCmd struct {
	etcd          etcdFlags
	dest          destination
	ref           backupRef
	compression   string
	idleTimeout   time.Duration
	allowNoLeader bool
}

func (c *saveCmd) bind(fs *flag.FlagSet) {
	c.etcd.bind(fs)
	c.dest.bind(fs)
	c.ref.bind(fs)
	fs.StringVar(&c.compression, "compression", "zstd", "zstd or none")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", time.Minute, "fail when etcd sends nothing for this long")
	fs.BoolVar(&c.allowNoLeader, "allow-no-leader", false, "snapshot a member that has no leader (recovering from quorum loss)")
}

func (c *saveCmd) run(ctx context.Context, env func(string) string, logf func(string, ...any)) (map[string]any, error) {
	comp, err := snapshot.ParseCompression(c.compression)
	if err != nil {
		return nil, usageError("--compression: " + err.Error())
	}
	key, err := c.ref.resolve()
	if err != nil {
		return nil, err
	}
	store, err := c.dest.store(env)
	if err != nil {
		return nil, err
	}
	cli, err := c.etcd.client()
	if err != nil {
		return nil, err
	}
	defer func() { _ = cli.Close() }()
	// Wrong credentials or a missing bucket fail here, before etcd streams anything.
	if s3, ok := store.(*objstore.S3); ok {
		if err := s3.Check(ctx); err != nil {
			return nil, err
		}
	}
	m, err := snapshot.Save(ctx, cli, store, snapshot.SaveOptions{Key: key, Compression: comp, Namespace: c.ref.namespace,
		Cluster: c.ref.cluster, Backup: c.ref.backup, IdleTimeout: c.idleTimeout, AllowNoLeader: c.allowNoLeader, Keys: c.dest.keys, Logf: logf})
	if err != nil {
		return nil, err
	}
	obj := key + "/" + m.Object
	return withFields(m, map[string]any{"location": store.Location(obj), "key": objectKey(store, obj)})
}

// fetchCmd: steward snapshot fetch.
type fetchCmd struct {
	dest                   destination
	ref                    backupRef
	pitr                   pointInTime
	out, skipIfExists      string
	expectSHA256, maxMinor string
}

func (c *fetchCmd) bind(fs *flag.FlagSet) {
	c.dest.bind(fs)
	c.ref.bind(fs)
	fs.StringVar(&c.out, "out", "", "file to write the snapshot to (for etcdutl snapshot restore)")
	fs.StringVar(&c.skipIfExists, "skip-if-exists", "", "do nothing when this path exists (the member's data directory): a restarted init container does not restore again")
	fs.StringVar(&c.expectSHA256, "expect-sha256", "", "sha256 (hex) the stored object must have; default: the manifest's")
	fs.StringVar(&c.maxMinor, "max-minor", "", "refuse snapshots of an etcd minor newer than this (3.6)")
	c.pitr.bind(fs)
}

func (c *fetchCmd) run(ctx context.Context, env func(string) string, logf func(string, ...any)) (map[string]any, error) {
	if c.out == "" {
		return nil, usageError("--out is required")
	}
	if c.pitr.set() {
		store, err := c.dest.store(env)
		if err != nil {
			return nil, err
		}
		return c.fetchPointInTime(ctx, store, logf)
	}
	key, err := c.ref.resolve()
	if err != nil {
		return nil, err
	}
	store, err := c.dest.store(env)
	if err != nil {
		return nil, err
	}
	r, err := snapshot.Fetch(ctx, store, key, c.out, snapshot.FetchOptions{ExpectSHA256: c.expectSHA256,
		MaxMinor: c.maxMinor, SkipIfExists: c.skipIfExists, Keys: c.dest.keys, Logf: logf})
	if err != nil {
		return nil, err
	}
	if r.Skipped {
		return map[string]any{"skipped": true, "path": c.skipIfExists}, nil
	}
	extra := map[string]any{"skipped": false, "path": r.Path, "location": r.Location, "sha256": r.SHA256,
		"size": r.Size, "rawSize": r.Scan.RawSize, "revision": r.Scan.Revision, "etcdHash": r.Scan.HasHash}
	if r.Manifest == nil {
		return extra, nil
	}
	return withFields(*r.Manifest, extra)
}

// verifyCmd: steward snapshot verify.
type verifyCmd struct {
	dest                   destination
	ref                    backupRef
	expectSHA256, maxMinor string
	etcd, etcdutl, workDir string
	bump                   int64
	// The point-in-time drill: the chain, the target, and the live cluster to compare with.
	pitr   pointInTime
	random bool
	live   etcdFlags
}

func (c *verifyCmd) bind(fs *flag.FlagSet) {
	c.dest.bind(fs)
	c.ref.bind(fs)
	fs.StringVar(&c.expectSHA256, "expect-sha256", "", "sha256 (hex) the stored object must have; default: the manifest's")
	fs.StringVar(&c.maxMinor, "max-minor", "", "refuse snapshots of an etcd minor newer than this (3.6)")
	fs.StringVar(&c.etcd, "etcd", "etcd", "etcd binary to serve the restored data with")
	fs.StringVar(&c.etcdutl, "etcdutl", "etcdutl", "etcdutl binary to restore with")
	fs.StringVar(&c.workDir, "work-dir", os.TempDir(), "directory for the snapshot and the restored data (twice the database)")
	fs.Int64Var(&c.bump, "bump-revision", 1_000_000_000, "etcdutl snapshot restore --bump-revision, as a real restore")
	c.pitr.bind(fs)
	fs.BoolVar(&c.random, "to-random-revision", false, "with --pitr-prefix: drill a random revision of the restorable range that the live cluster (--endpoint) still holds")
	c.live.bind(fs)
}

func (c *verifyCmd) run(ctx context.Context, env func(string) string, logf func(string, ...any)) (map[string]any, error) {
	if c.pitr.prefix != "" {
		store, err := c.dest.store(env)
		if err != nil {
			return nil, err
		}
		return c.verifyPointInTime(ctx, store, logf)
	}
	if c.random || c.pitr.set() || c.live.endpoint != "" {
		return nil, usageError("--to-revision, --to-time, --to-random-revision and --endpoint are for the point-in-time drill: give --pitr-prefix")
	}
	key, err := c.ref.resolve()
	if err != nil {
		return nil, err
	}
	store, err := c.dest.store(env)
	if err != nil {
		return nil, err
	}
	r, err := snapshot.Verify(ctx, store, key, snapshot.VerifyOptions{ExpectSHA256: c.expectSHA256, MaxMinor: c.maxMinor,
		Etcd: c.etcd, Etcdutl: c.etcdutl, WorkDir: c.workDir, Bump: c.bump, Keys: c.dest.keys, Logf: logf})
	if err != nil {
		return nil, err
	}
	res, err := withFields(r, map[string]any{"durationSeconds": r.Duration.Seconds(), "location": store.Location(key)})
	if err == nil && !r.Verified {
		err = errors.New("verification failed: " + r.Message)
		delete(res, "message") // the error says it
	}
	return res, err
}

// deleteCmd: steward snapshot delete.
type deleteCmd struct {
	dest destination
	ref  backupRef
}

func (c *deleteCmd) bind(fs *flag.FlagSet) {
	c.dest.bind(fs)
	c.ref.bind(fs)
}

func (c *deleteCmd) run(ctx context.Context, env func(string) string, logf func(string, ...any)) (map[string]any, error) {
	key, err := c.ref.resolve()
	if err != nil {
		return nil, err
	}
	store, err := c.dest.store(env)
	if err != nil {
		return nil, err
	}
	deleted, err := snapshot.Delete(ctx, store, key)
	for _, d := range deleted {
		logf("deleted %s", store.Location(d))
	}
	if err != nil {
		return nil, err
	}
	if deleted == nil {
		deleted = []string{}
	}
	return map[string]any{"deleted": deleted, "location": store.Location(key)}, nil
}

// withFields is v's JSON object with extra fields added.
func withFields(v any, extra map[string]any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // revisions stay integers
	var out map[string]any
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("result: %w", err)
	}
	for k, val := range extra {
		out[k] = val
	}
	return out, nil
}

// restoreCmd: steward snapshot restore, in the etcd image (copied in by install-self).
type restoreCmd struct {
	o snapshot.RestoreOptions
}

func (c *restoreCmd) bind(fs *flag.FlagSet) {
	fs.StringVar(&c.o.Snapshot, "snapshot", "", "the fetched snapshot file")
	fs.StringVar(&c.o.Stage, "stage", "", "scratch directory on the data volume")
	fs.StringVar(&c.o.DataDir, "data-dir", "", "the member's data directory; left alone when it holds a member")
	fs.StringVar(&c.o.Name, "name", "", "the member's name")
	fs.StringVar(&c.o.InitialCluster, "initial-cluster", "", "etcdutl --initial-cluster")
	fs.StringVar(&c.o.Token, "initial-cluster-token", "", "etcdutl --initial-cluster-token")
	fs.StringVar(&c.o.PeerURL, "initial-advertise-peer-urls", "", "etcdutl --initial-advertise-peer-urls")
	fs.Int64Var(&c.o.Bump, "bump-revision", 1_000_000_000, "etcdutl --bump-revision (with --mark-compacted); 0 for none")
	fs.StringVar(&c.o.Etcdutl, "etcdutl", "etcdutl", "etcdutl binary to restore with")
}

func (c *restoreCmd) run(ctx context.Context, _ func(string) string, logf func(string, ...any)) (map[string]any, error) {
	if c.o.Snapshot == "" || c.o.Stage == "" || c.o.DataDir == "" || c.o.Name == "" {
		return nil, usageError("--snapshot, --stage, --data-dir and --name are required")
	}
	c.o.Logf = logf
	r, err := snapshot.RestoreLocal(ctx, c.o)
	if err != nil {
		return nil, err
	}
	logf("%s", r.Message)
	return withFields(r, nil)
}
