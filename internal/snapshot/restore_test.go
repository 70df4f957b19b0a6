package snapshot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcd-steward/steward/internal/snapshot/snaptest"
)

// RestoreLocal seeds an empty data directory with real etcdutl, and leaves alone one that holds a
// member (a recreated Pod must not restore twice over live data) and one whose restore failed.
func TestRestoreLocal(t *testing.T) {
	ctx := tctx(t)
	_, cli := startEtcd(t)
	fill(t, cli, "k", 50, 10)
	raw := rawSnapshot(t, cli)
	vol := t.TempDir()
	snap := filepath.Join(vol, "restore", "snapshot.db")
	if err := os.MkdirAll(filepath.Dir(snap), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(snap, raw, 0o600); err != nil { // as fetch stores it, with etcd's trailing hash
		t.Fatal(err)
	}
	o := RestoreOptions{Snapshot: snap, Stage: filepath.Join(vol, "restore"), DataDir: filepath.Join(vol, "data"),
		Name: "demo-0", InitialCluster: "demo-0=http://127.0.0.1:2380", Token: "t", PeerURL: "http://127.0.0.1:2380",
		Bump: 1000, Etcdutl: snaptest.Etcdutl(t), Logf: t.Logf}

	bad := o
	bad.Snapshot = filepath.Join(vol, "missing.db")
	if _, err := RestoreLocal(ctx, bad); err == nil || !strings.Contains(err.Error(), "etcdutl snapshot restore") {
		t.Fatalf("restore of a missing snapshot: %v", err)
	}
	if _, err := os.Stat(o.DataDir); !os.IsNotExist(err) {
		t.Fatalf("a failed restore left a data directory: %v", err)
	}

	r, err := RestoreLocal(ctx, o)
	if err != nil || !r.Restored {
		t.Fatalf("restore: %+v %v", r, err)
	}
	if _, err := os.Stat(filepath.Join(o.DataDir, "member", "snap", "db")); err != nil {
		t.Fatalf("no member in the data directory: %v", err)
	}
	if _, err := os.Stat(o.Stage); !os.IsNotExist(err) {
		t.Errorf("the stage was left behind: %v", err)
	}
	marker := filepath.Join(o.DataDir, "member", "live")
	if err := os.WriteFile(marker, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(o.Stage, 0o700); err != nil {
		t.Fatal(err)
	}
	r, err = RestoreLocal(ctx, o)
	if err != nil || r.Restored || !strings.Contains(r.Message, "holds a member") {
		t.Fatalf("second restore: %+v %v", r, err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the live member's data was touched: %v", err)
	}
}
