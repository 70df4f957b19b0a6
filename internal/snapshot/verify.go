package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-steward/steward/internal/encryption"
	"github.com/etcd-steward/steward/internal/objstore"
)

// VerifyOptions configure the restore drill.
type VerifyOptions struct {
	ExpectSHA256, MaxMinor string
	// Etcd and Etcdutl are the binaries to restore and serve with (the etcd version the cluster
	// runs, ideally).
	Etcd, Etcdutl string
	// WorkDir receives the snapshot and the restored data directory (removed afterwards); it
	// needs room for twice the database.
	WorkDir string
	// Bump is passed to etcdutl snapshot restore --bump-revision (with --mark-compacted), as a
	// real restore does so that watchers never see revisions go backwards; 0 restores as is.
	Bump int64
	// StartTimeout bounds the restored member's start (default 5m: a large database takes a
	// while to load and compact).
	StartTimeout time.Duration
	// Keys open a sealed backup (FetchOptions.Keys): a drill decrypts as a restore does.
	Keys *encryption.Keyring
	// Fetch, if set, writes the snapshot to drill to path instead of fetching key: the
	// point-in-time drill replays a chain to a revision.
	Fetch func(ctx context.Context, path string) (FetchResult, error)
	// Compare, if set, reads the restored member while it serves; a failed string fails the drill
	// (stage content), a note goes into its message.
	Compare func(ctx context.Context, restored *clientv3.Client) (note, failed string)
	Logf    func(format string, args ...any)
}

// VerifyResult is the drill's outcome.
type VerifyResult struct {
	Verified bool `json:"verified"`
	// Stage is where a failed drill stopped: fetch, status, restore, start, revision, content.
	Stage string `json:"stage,omitempty"`
	// Revision is what the restored member serves; ExpectedRevision what it must serve
	// (etcdutl's revision of the snapshot + Bump, or the snapshot's revision without a bump).
	Revision         int64 `json:"revision"`
	ExpectedRevision int64 `json:"expectedRevision"`
	// SnapshotRevision is the snapshot's own revision (Manifest.Revision).
	SnapshotRevision int64 `json:"snapshotRevision"`
	// Keys is the number of keys the restored member serves.
	Keys     int64         `json:"keys"`
	Duration time.Duration `json:"-"`
	Message  string        `json:"message"`
	Manifest *Manifest     `json:"-"`
}

// Verify runs a restore drill: Fetch the backup into WorkDir, etcdutl snapshot restore it, start
// etcd on it on loopback ports (no peers; its client port on TLS of its own, read as root), read it linearizably, check the revision it
// serves and, when the manifest holds the member's HashKV, that the snapshot's keyspace hashes the
// same; then stop it. An error means the drill could not run (bad options); a drill that ran and
// failed says so in the result.
func Verify(ctx context.Context, store objstore.Store, key string, opts VerifyOptions) (VerifyResult, error) {
	start := time.Now()
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 5 * time.Minute
	}
	for name, bin := range map[string]string{"etcd": opts.Etcd, "etcdutl": opts.Etcdutl} {
		if bin == "" {
			return VerifyResult{}, fmt.Errorf("the restore drill needs the %s binary", name)
		}
		if _, err := exec.LookPath(bin); err != nil {
			return VerifyResult{}, fmt.Errorf("the restore drill needs the %s binary: %w", name, err)
		}
	}
	if opts.Bump < 0 {
		return VerifyResult{}, errors.New("the revision bump cannot be negative")
	}
	dir, err := os.MkdirTemp(opts.WorkDir, "steward-verify-")
	if err != nil {
		return VerifyResult{}, fmt.Errorf("restore drill work directory: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	d := &drill{opts: opts, dir: dir}
	res := d.run(ctx, store, key)
	res.Duration = time.Since(start)
	if res.Verified {
		opts.Logf("verified: %s", res.Message)
	} else {
		opts.Logf("verification failed (%s): %s", res.Stage, res.Message)
	}
	return res, nil
}

type drill struct {
	opts VerifyOptions
	dir  string
}

func failed(stage string, format string, args ...any) VerifyResult {
	return VerifyResult{Stage: stage, Message: fmt.Sprintf(format, args...)}
}

func (d *drill) run(ctx context.Context, store objstore.Store, key string) VerifyResult {
	file := filepath.Join(d.dir, "snapshot.db")
	fetch := d.opts.Fetch
	if fetch == nil {
		fetch = func(ctx context.Context, path string) (FetchResult, error) {
			return Fetch(ctx, store, key, path, FetchOptions{ExpectSHA256: d.opts.ExpectSHA256, MaxMinor: d.opts.MaxMinor, Keys: d.opts.Keys, Logf: d.opts.Logf})
		}
	}
	fr, err := fetch(ctx, file)
	if err != nil {
		return failed("fetch", "%v", err)
	}
	res := VerifyResult{Manifest: fr.Manifest, SnapshotRevision: fr.Scan.Revision}
	var st struct {
		Revision int64 `json:"revision"`
		TotalKey int64 `json:"totalKey"`
	}
	if out, err := d.etcdutl(ctx, "snapshot", "status", file, "-w", "json"); err != nil {
		return failed("status", "etcdutl snapshot status: %v", err)
	} else if err := json.Unmarshal(lastLine(out), &st); err != nil {
		return failed("status", "etcdutl snapshot status printed %q: %v", tail(string(out), 300), err)
	}

	ports := freePorts(2)
	if ports == nil {
		return failed("start", "no free loopback ports")
	}
	peer, client := fmt.Sprintf("http://127.0.0.1:%d", ports[0]), fmt.Sprintf("https://127.0.0.1:%d", ports[1])
	data := filepath.Join(d.dir, "data")
	args := []string{"snapshot", "restore", file, "--data-dir", data, "--name", "verify",
		"--initial-cluster", "verify=" + peer, "--initial-advertise-peer-urls", peer, "--initial-cluster-token", "steward-verify"}
	res.ExpectedRevision = res.SnapshotRevision
	if d.opts.Bump > 0 {
		args = append(args, "--bump-revision", strconv.FormatInt(d.opts.Bump, 10), "--mark-compacted")
		// etcdutl bumps the highest key of bucket "key", which is its status revision.
		res.ExpectedRevision = st.Revision + d.opts.Bump
	}
	if _, err := d.etcdutl(ctx, args...); err != nil {
		return failed("restore", "etcdutl snapshot restore: %v", err)
	}
	content := contentCheck{}
	if d.opts.Compare == nil { // a drill with its own comparison has no manifest HashKV to hold to
		content = d.compareHashKV(ctx, file, fr)
	}
	if content.failed != "" {
		res.Stage, res.Message = "content", content.failed
		return res
	}

	var live contentCheck
	served, keys, err := d.serve(ctx, data, peer, client, func(cli *clientv3.Client) {
		if d.opts.Compare != nil {
			live.note, live.failed = d.opts.Compare(ctx, cli)
		}
	})
	if err != nil {
		return failed("start", "%v", err)
	}
	res.Revision, res.Keys = served, keys
	if live.note != "" {
		content.note = strings.TrimPrefix(content.note+"; "+live.note, "; ")
	}
	switch {
	case live.failed != "":
		res.Stage, res.Message = "content", live.failed
	case served != res.ExpectedRevision:
		res.Stage, res.Message = "revision", fmt.Sprintf("the restored member serves revision %d, expected %d", served, res.ExpectedRevision)
	case d.opts.Bump > 0 && served <= res.SnapshotRevision:
		res.Stage, res.Message = "revision", fmt.Sprintf("with a bump of %d the restored member serves revision %d, not above the snapshot's %d: watchers would see revisions go back; use a larger bump", d.opts.Bump, served, res.SnapshotRevision)
	default:
		res.Verified = true
		res.Message = fmt.Sprintf("restored with bump %d, etcd serves revision %d and %d keys; %s", d.opts.Bump, served, keys, content.note)
	}
	return res
}

type contentCheck struct{ note, failed string }

// compareHashKV hashes the fetched snapshot's keyspace at its revision (etcdutl hashkv, which etcd
// 3.6 added) and compares it with the member's own HashKV recorded at save time. etcdutl hashkv may
// write to the file it opens, so it runs after the restore has copied the file.
func (d *drill) compareHashKV(ctx context.Context, file string, fr FetchResult) contentCheck {
	m := fr.Manifest
	if m == nil || m.HashKV == nil {
		return contentCheck{note: "content not compared: the backup has no HashKV"}
	}
	out, err := d.etcdutl(ctx, "hashkv", file, "--rev", strconv.FormatInt(m.Revision, 10), "-w", "json")
	if err != nil && strings.Contains(err.Error(), `unknown command "hashkv"`) {
		return contentCheck{note: "content not compared: this etcdutl has no hashkv (etcd 3.6 added it)"}
	}
	if err != nil {
		return contentCheck{note: fmt.Sprintf("content not compared: etcdutl hashkv: %v", err)}
	}
	var h struct {
		Hash            uint32 `json:"hash"`
		CompactRevision int64  `json:"compactRevision"`
	}
	if err := json.Unmarshal(lastLine(out), &h); err != nil {
		return contentCheck{note: fmt.Sprintf("content not compared: etcdutl hashkv printed %q", tail(string(out), 200))}
	}
	switch {
	case h.CompactRevision != m.HashKV.CompactRevision:
		return contentCheck{note: fmt.Sprintf("content not compared: the member compacted to %d before hashing, the snapshot is compacted to %d", m.HashKV.CompactRevision, h.CompactRevision)}
	case h.Hash != m.HashKV.Hash:
		return contentCheck{failed: fmt.Sprintf("the snapshot's keyspace at revision %d hashes to %d, the member's hashed to %d: the snapshot does not hold what the member served", m.Revision, h.Hash, m.HashKV.Hash)}
	}
	return contentCheck{note: fmt.Sprintf("the keyspace at revision %d hashes as the member's did (%d)", m.Revision, h.Hash)}
}

func (d *drill) etcdutl(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, d.opts.Etcdutl, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%w: %s", err, tail(strings.TrimSpace(stderr.String()+"\n"+string(out)), 600))
	}
	return out, nil
}

func lastLine(b []byte) []byte {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return []byte(lines[len(lines)-1])
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
