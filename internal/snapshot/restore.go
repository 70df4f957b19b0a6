package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// RestoreOptions seed one member's data directory from a fetched snapshot.
type RestoreOptions struct {
	// Snapshot is the fetched file; Stage a scratch directory on the same volume as DataDir.
	Snapshot, Stage, DataDir string
	// Name, InitialCluster, Token and PeerURL are the member's etcd identity (etcdutl's flags).
	Name, InitialCluster, Token, PeerURL string
	// Bump is --bump-revision; the restore also marks the bumped revisions compacted.
	Bump    int64
	Etcdutl string
	Logf    func(string, ...any)
}

// RestoreResult says what RestoreLocal did.
type RestoreResult struct {
	Restored bool   `json:"restored"`
	Message  string `json:"message"`
}

// RestoreLocal restores a snapshot into DataDir with etcdutl. It never touches a data directory
// that holds a member (an operator restart or a recreated Pod must not restore twice over live
// data), restores into Stage and renames it into place only when etcdutl succeeded, so a crash
// leaves no half-restored member. It runs in the etcd image (distroless: no shell), as the Steward
// binary copied in by install-self.
func RestoreLocal(ctx context.Context, o RestoreOptions) (RestoreResult, error) {
	if _, err := os.Stat(filepath.Join(o.DataDir, "member")); err == nil {
		_ = os.RemoveAll(o.Stage)
		return RestoreResult{Message: "data directory " + o.DataDir + " holds a member: nothing to restore"}, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return RestoreResult{}, err
	}
	staged := filepath.Join(o.Stage, "data")
	if err := os.RemoveAll(staged); err != nil {
		return RestoreResult{}, err
	}
	args := []string{"snapshot", "restore", o.Snapshot, "--data-dir", staged, "--name", o.Name,
		"--initial-cluster", o.InitialCluster, "--initial-cluster-token", o.Token,
		"--initial-advertise-peer-urls", o.PeerURL}
	if o.Bump > 0 {
		args = append(args, "--bump-revision", strconv.FormatInt(o.Bump, 10), "--mark-compacted")
	}
	cmd := exec.CommandContext(ctx, o.Etcdutl, args...)
	// etcdutl reads ETCDUTL_* variables as flags; it gets none of ours.
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return RestoreResult{}, fmt.Errorf("etcdutl snapshot restore: %w: %s", err, tail(strings.TrimSpace(string(out)), 600))
	}
	if err := os.RemoveAll(o.DataDir); err != nil {
		return RestoreResult{}, err
	}
	if err := os.Rename(staged, o.DataDir); err != nil {
		return RestoreResult{}, err
	}
	if err := os.RemoveAll(o.Stage); err != nil {
		return RestoreResult{}, err
	}
	return RestoreResult{Restored: true, Message: "restored " + o.Name + " from the snapshot"}, nil
}
