package snapshot

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-steward/steward/internal/snapshot/snaptest"
)

func verifyOpts(t *testing.T, bump int64) VerifyOptions {
	return VerifyOptions{Etcd: snaptest.Etcd(t), Etcdutl: snaptest.Etcdutl(t), WorkDir: t.TempDir(), Bump: bump, MaxMinor: "3.9", Logf: t.Logf}
}

// The drill restores a real backup with real etcdutl and etcd: the restored member serves the
// snapshot's keys at etcdutl's revision plus the bump, and the snapshot's keyspace hashes as the
// member's did when the backup was taken.
func TestVerifyRestoresAndServes(t *testing.T) {
	ctx := tctx(t)
	_, cli := startEtcd(t)
	fill(t, cli, "k", 500, 200)
	if _, err := cli.Delete(ctx, "k/000001"); err != nil {
		t.Fatal(err)
	}
	store := volume(t)
	m, err := Save(ctx, cli, store, saveOpts(CompressionZstd))
	if err != nil {
		t.Fatal(err)
	}
	// The member moves on after the backup; the drill is about the backup.
	fill(t, cli, "later", 10, 10)

	for _, bump := range []int64{1_000_000_000, 0} {
		res, err := Verify(ctx, store, "db/demo/b1", verifyOpts(t, bump))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Verified || res.Revision != m.Revision+bump || res.ExpectedRevision != res.Revision || res.Keys != 499 ||
			res.SnapshotRevision != m.Revision || !strings.Contains(res.Message, contentNote(t)) || res.Duration <= 0 {
			t.Errorf("bump %d: %+v (manifest revision %d)", bump, res, m.Revision)
		}
	}
}

// A backup of a cluster with etcd authentication on holds the auth store: the restored member
// starts with auth on, and a drill reading it without credentials was refused ("user name is
// empty") until its start timed out. The drill presents a root client certificate on a throwaway
// TLS listener, so it reads any backup, and the data holds the users (root among them) it restores.
func TestVerifyWithAuthOn(t *testing.T) {
	ctx := tctx(t)
	c, cli := startEtcd(t)
	fill(t, cli, "k", 50, 100)
	for _, step := range []func() error{
		func() error { _, err := cli.RoleAdd(ctx, "root"); return err },
		func() error { _, err := cli.UserAdd(ctx, "root", "drill-secret"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.UserAdd(ctx, "app", "app-secret"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	root, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Members[0].ClientURL}, DialTimeout: 5 * time.Second,
		Logger: zap.NewNop(), DialOptions: DialOptions(), Username: "root", Password: "drill-secret"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = root.Close() }()
	store := volume(t)
	m, err := Save(ctx, root, store, saveOpts(CompressionZstd))
	if err != nil {
		t.Fatal(err)
	}
	opts := verifyOpts(t, 1_000_000_000)
	opts.StartTimeout = 20 * time.Second // not the default 5 min: a refused drill fails fast here
	var users []string
	opts.Compare = func(ctx context.Context, cli *clientv3.Client) (string, string) {
		l, err := cli.UserList(ctx) // root only
		if err != nil {
			return "", err.Error()
		}
		users = l.Users
		return "users listed", ""
	}
	res, err := Verify(ctx, store, "db/demo/b1", opts)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verified || res.Keys != 50 || res.Revision != m.Revision+1_000_000_000 {
		t.Errorf("a backup with auth on: %+v (manifest revision %d)", res, m.Revision)
	}
	if !slices.Equal(users, []string{"app", "root"}) {
		t.Errorf("the restored member's users: %v, want app and root", users)
	}
}

// contentNote is what the drill says about content: etcdutl 3.5 has no hashkv.
func contentNote(t *testing.T) string {
	if err := exec.Command(snaptest.Etcdutl(t), "hashkv", "--help").Run(); err != nil {
		return "content not compared: this etcdutl has no hashkv"
	}
	return "hashes as the member's did"
}

func TestVerifyFails(t *testing.T) {
	ctx := tctx(t)
	_, cli := startEtcd(t)
	fill(t, cli, "k", 100, 100)
	store := volume(t)
	m, err := Save(ctx, cli, store, saveOpts(CompressionNone))
	if err != nil {
		t.Fatal(err)
	}

	// A manifest whose HashKV is not the snapshot's: the content check catches it.
	m.HashKV.Hash++
	if err := writeManifest(ctx, store, "db/demo/b1", m); err != nil {
		t.Fatal(err)
	}
	res, err := Verify(ctx, store, "db/demo/b1", verifyOpts(t, 1000))
	if strings.HasPrefix(contentNote(t), "content not compared") {
		if err != nil || !res.Verified || !strings.Contains(res.Message, contentNote(t)) {
			t.Errorf("tampered HashKV, etcdutl without hashkv: %+v, %v", res, err)
		}
	} else if err != nil || res.Verified || res.Stage != "content" || !strings.Contains(res.Message, "does not hold what the member served") {
		t.Errorf("tampered HashKV: %+v, %v", res, err)
	}

	// A damaged object never gets as far as etcdutl.
	corrupt(t, store, "db/demo/b1/snapshot.db")
	res, err = Verify(ctx, store, "db/demo/b1", verifyOpts(t, 1000))
	if err != nil || res.Verified || res.Stage != "fetch" || !strings.Contains(res.Message, "sha256") {
		t.Errorf("corrupt object: %+v, %v", res, err)
	}

	if _, err := Verify(ctx, store, "db/demo/b1", VerifyOptions{Etcd: "/nonexistent/etcd", Etcdutl: snaptest.Etcdutl(t)}); err == nil {
		t.Error("a drill without an etcd binary ran")
	}
}

// etcdutl's own view of a Save'd snapshot agrees with the manifest (revision, and the file is
// one etcdutl accepts, hash included).
func TestEtcdutlAgreesWithTheManifest(t *testing.T) {
	ctx := tctx(t)
	_, cli := startEtcd(t)
	fill(t, cli, "k", 1000, 300)
	if _, err := cli.Compact(ctx, liveRevision(t, cli)-10, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	store := volume(t)
	m, err := Save(ctx, cli, store, saveOpts(CompressionZstd))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir() + "/snapshot.db"
	if _, err := Fetch(ctx, store, "db/demo/b1", out, FetchOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := exec.Command(snaptest.Etcdutl(t), "snapshot", "status", out, "-w", "json").Output()
	if err != nil {
		t.Fatalf("etcdutl snapshot status: %v", err)
	}
	var st struct {
		Revision int64  `json:"revision"`
		Version  string `json:"version"`
	}
	if err := json.Unmarshal(lastLine(b), &st); err != nil {
		t.Fatal(err)
	}
	if st.Revision != m.Revision {
		t.Errorf("etcdutl says revision %d, the manifest %d", st.Revision, m.Revision)
	}
}
