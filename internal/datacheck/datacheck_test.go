package datacheck

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-steward/steward/internal/etcdtest"
)

// Real etcd data directories: each names its own member; another member's ID, an empty
// directory and a directory whose WAL is gone are told apart.
func TestCheckRealDataDirectories(t *testing.T) {
	c := etcdtest.Start(t, 3)
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.ClientURLs(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = cli.Close()
	ids := map[string]uint64{}
	for _, m := range list.Members {
		ids[m.Name] = m.ID
	}
	c.Stop()
	for _, m := range c.Members {
		// A real etcd 3.6 backend reads without error: storageVersion 3.6.0 once the cluster
		// version reached 3.6 and etcd wrote it, none if the cluster stopped before.
		if v, err := StorageVersion(m.DataDir()); err != nil || (v != "" && v != "3.6.0") {
			t.Errorf("%s: storage version %q, %v", m.Name, v, err)
		}
	}
	for i, m := range c.Members {
		r, err := Check(m.DataDir(), ids[m.Name])
		if err != nil || r.Verdict != OK {
			t.Errorf("%s with its own ID: %+v %v", m.Name, r, err)
		}
		other := c.Members[(i+1)%3]
		r, err = Check(m.DataDir(), ids[other.Name])
		if err != nil || r.Verdict != Foreign || !strings.Contains(r.Message, "not ") {
			t.Errorf("%s as %s: %+v %v", m.Name, other.Name, r, err)
		}
	}
	r, err := Check(t.TempDir(), 1)
	if err != nil || r.Verdict != Empty {
		t.Errorf("empty directory: %+v %v", r, err)
	}
	wiped := c.Members[0].DataDir()
	if err := os.RemoveAll(filepath.Join(wiped, "member", "wal")); err != nil {
		t.Fatal(err)
	}
	if r, err := Check(wiped, ids[c.Members[0].Name]); err != nil || r.Verdict != Empty {
		t.Errorf("WAL removed: %+v %v", r, err)
	}
}

func TestCheckRefusesGarbage(t *testing.T) {
	dir := t.TempDir()
	wal := filepath.Join(dir, "member", "wal")
	if err := os.MkdirAll(wal, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wal, "0000000000000000-0000000000000000.wal"), []byte("not a wal at all, just text"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r, err := Check(dir, 1); err == nil {
		t.Errorf("garbage WAL: %+v, want an error", r)
	}
}
