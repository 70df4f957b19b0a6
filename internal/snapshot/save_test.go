package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-steward/steward/internal/objstore"
	"github.com/etcd-steward/steward/internal/objstore/s3test"
)

func volume(t *testing.T) *objstore.Volume {
	t.Helper()
	v, err := objstore.NewVolume(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func saveOpts(c Compression) SaveOptions {
	return SaveOptions{Key: BackupKey("db", "demo", "b1"), Compression: c, Namespace: "db", Cluster: "demo", Backup: "b1"}
}

// objectSHA is the sha256 of the object as the store holds it.
func objectSHA(t *testing.T, store objstore.Store, key string) (string, int64) {
	t.Helper()
	rc, _, err := store.Get(tctx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	h := sha256.New()
	n, err := io.Copy(h, rc)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil)), n
}

func TestSaveThenFetch(t *testing.T) {
	ctx := tctx(t)
	_, cli := startEtcd(t)
	fill(t, cli, "k", 2000, 500)
	live := liveRevision(t, cli)
	st, err := cli.Status(ctx, cli.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []Compression{CompressionZstd, CompressionNone} {
		t.Run(string(c), func(t *testing.T) {
			store := volume(t)
			m, err := Save(ctx, cli, store, saveOpts(c))
			if err != nil {
				t.Fatal(err)
			}
			if m.Revision != live || m.Member.ID != fmt.Sprintf("%x", st.Header.MemberId) || m.Member.Name != "m0" ||
				m.ClusterID != fmt.Sprintf("%x", st.Header.ClusterId) || m.EtcdVersion != st.Version || m.Compression != c ||
				m.Object != c.ObjectName() || m.FormatVersion != FormatVersion || m.HashKV == nil || !m.CompletedAt.After(m.StartedAt) {
				t.Errorf("manifest %+v (live revision %d, status %+v)", m, live, st)
			}
			sum, size := objectSHA(t, store, "db/demo/b1/"+c.ObjectName())
			if sum != m.SHA256 || size != m.Size {
				t.Errorf("stored object: sha %s size %d; manifest %s %d", sum, size, m.SHA256, m.Size)
			}
			if c == CompressionZstd && m.Size*2 > m.RawSize {
				t.Errorf("zstd stored %d of %d bytes", m.Size, m.RawSize)
			}
			info, err := store.Stat(ctx, "db/demo/b1/"+c.ObjectName())
			if err != nil || info.Metadata["compression"] != string(c) || info.Metadata["cluster"] != "db/demo" || !strings.HasPrefix(info.Metadata["member"], "m0 (") {
				t.Errorf("object metadata %v, %v", info.Metadata, err)
			}
			read, err := ReadManifest(ctx, store, "db/demo/b1")
			if err != nil || read.SHA256 != m.SHA256 || read.Revision != m.Revision {
				t.Errorf("ReadManifest = %+v, %v", read, err)
			}

			out := filepath.Join(t.TempDir(), "restore", "snapshot.db")
			fr, err := Fetch(ctx, store, "db/demo/b1", out, FetchOptions{MaxMinor: "3.7"})
			if err != nil {
				t.Fatal(err)
			}
			if fr.Skipped || fr.Manifest == nil || fr.SHA256 != m.SHA256 || fr.Scan.Revision != live || !fr.Scan.HasHash {
				t.Errorf("Fetch = %+v", fr)
			}
			if f := openBolt(t, mustRead(t, out)); f.keyRevision != live {
				t.Errorf("fetched database: last key %d, want %d", f.keyRevision, live)
			}
			if _, err := os.Stat(out + ".partial"); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("partial file left: %v", err)
			}
			// A restarted init container finds the data directory and does nothing.
			again, err := Fetch(ctx, store, "db/demo/b1", filepath.Join(t.TempDir(), "x"), FetchOptions{SkipIfExists: out})
			if err != nil || !again.Skipped {
				t.Errorf("with SkipIfExists: %+v, %v", again, err)
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFetchRefuses(t *testing.T) {
	ctx := tctx(t)
	_, cli := startEtcd(t)
	fill(t, cli, "k", 300, 300)
	store := volume(t)
	m, err := Save(ctx, cli, store, saveOpts(CompressionZstd))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "snapshot.db")
	check := func(name string, key string, opts FetchOptions, want ...string) {
		t.Helper()
		_, err := Fetch(ctx, store, key, out, opts)
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want %q", name, err, w)
			}
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%s: left %s behind", name, entries[0].Name())
		}
	}
	wrong := strings.Repeat("ab", 32)
	check("wrong expected sha256", "db/demo/b1", FetchOptions{ExpectSHA256: wrong}, m.SHA256, wrong, "--expect-sha256")
	// The refusal goes by the data format the manifest recorded: a 3.6 server reports storage
	// version 3.5.0 until its version monitor upgrades the schema a few seconds after start, and
	// such a snapshot is one etcd 3.5 restores.
	v := m.StorageVersion
	if v == "" {
		v = m.EtcdVersion
	}
	_, minor, ok := minorOf(v)
	if !ok {
		t.Fatalf("manifest version %q", v)
	}
	older := fmt.Sprintf("3.%d", minor-1)
	check("newer minor", "db/demo/b1", FetchOptions{MaxMinor: older}, "newer than etcd "+older, fmt.Sprintf("restore with etcd 3.%d or later", minor))
	check("no backup", "db/demo/none", FetchOptions{}, "no snapshot at")

	// Manifest and object that do not belong together (another backup's manifest).
	other, err := Save(ctx, cli, store, SaveOptions{Key: "db/demo/b2", Compression: CompressionNone, Namespace: "db", Cluster: "demo", Backup: "b2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "one-more", "write"); err != nil {
		t.Fatal(err)
	}
	b3, err := Save(ctx, cli, store, SaveOptions{Key: "db/demo/b3", Compression: CompressionNone, Namespace: "db", Cluster: "demo", Backup: "b3"})
	if err != nil {
		t.Fatal(err)
	}
	copyObject(t, store, "db/demo/b2/snapshot.db", "db/demo/b3/snapshot.db")
	check("manifest of another snapshot", "db/demo/b3", FetchOptions{ExpectSHA256: other.SHA256},
		fmt.Sprintf("holds revision %d", other.Revision), fmt.Sprintf("manifest says revision %d", b3.Revision))

	// The stored object is damaged: its sha256 no longer matches the manifest.
	corrupt(t, store, "db/demo/b1/snapshot.db.zst")
	check("corrupt object", "db/demo/b1", FetchOptions{}, "but the manifest says "+m.SHA256, "corrupt")
}

func copyObject(t *testing.T, store objstore.Store, from, to string) {
	t.Helper()
	rc, _, err := store.Get(tctx(t), from)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	if _, err := store.Put(tctx(t), to, rc, nil); err != nil {
		t.Fatal(err)
	}
}

// corrupt flips one byte in the middle of a stored object.
func corrupt(t *testing.T, store objstore.Store, key string) {
	t.Helper()
	rc, _, err := store.Get(tctx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if _, err := store.Put(tctx(t), key, strings.NewReader(string(b)), map[string]string{"compression": "zstd"}); err != nil {
		t.Fatal(err)
	}
}

// A snapshot uploaded by hand (no manifest; etcdctl snapshot save's file) is found by name and
// still checked against etcd's own hash.
func TestFetchWithoutManifest(t *testing.T) {
	ctx := tctx(t)
	_, cli := startEtcd(t)
	fill(t, cli, "k", 100, 100)
	raw := rawSnapshot(t, cli)
	store := volume(t)
	if _, err := store.Put(ctx, "manual/etcd-backup.db", strings.NewReader(string(raw)), nil); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "snapshot.db")
	same, _ := serverMinor(t, cli)
	fr, err := Fetch(ctx, store, "manual/etcd-backup.db", out, FetchOptions{MaxMinor: same})
	if err != nil || fr.Manifest != nil || fr.Scan.Revision != liveRevision(t, cli) || !fr.Scan.HasHash {
		t.Fatalf("Fetch = %+v, %v", fr, err)
	}
	broken := flip(raw, len(raw)/3)
	if _, err := store.Put(ctx, "manual/broken.db", strings.NewReader(string(broken)), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Fetch(ctx, store, "manual/broken.db", out+"2", FetchOptions{}); err == nil || !strings.Contains(err.Error(), "sha256 of the database does not match") {
		t.Errorf("a damaged snapshot without manifest: %v", err)
	}
}

// A member that does not answer fails the save within the status timeout; a member without a
// leader is refused after LeaderWait unless the save is for a quorum-loss recovery.
func TestSaveFailsFast(t *testing.T) {
	ctx := tctx(t)
	store := volume(t)
	dead, err := clientv3.New(clientv3.Config{Endpoints: []string{fmt.Sprintf("http://127.0.0.1:%d", s3test.FreePort(t))}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dead.Close() }()
	start := time.Now()
	opts := saveOpts(CompressionZstd)
	opts.StatusTimeout = 2 * time.Second
	if _, err := Save(ctx, dead, store, opts); err == nil || !strings.Contains(err.Error(), "did not answer its status within 2s") || time.Since(start) > 10*time.Second {
		t.Errorf("member down: %v after %s", err, time.Since(start))
	}

	_, one := quorumLost(t)
	start = time.Now()
	opts.LeaderWait = 3 * time.Second
	_, err = Save(ctx, one, store, opts)
	if err == nil || !strings.Contains(err.Error(), "has had no leader for 3s") || time.Since(start) < 3*time.Second || time.Since(start) > 15*time.Second {
		t.Errorf("quorum lost: %v after %s", err, time.Since(start))
	}
	if list, _ := store.List(ctx, ""); len(list) != 0 {
		t.Errorf("a refused save stored %d objects", len(list))
	}
	opts.AllowNoLeader = true
	if m, err := Save(ctx, one, store, opts); err != nil || m.Revision == 0 {
		t.Errorf("quorum lost, AllowNoLeader: %+v, %v", m, err)
	}
}

// quorumLost is a 3-member cluster with data, two members killed, and a client of the third, which
// has no leader.
func quorumLost(t *testing.T) (cluster, *clientv3.Client) {
	t.Helper()
	c := startCluster(t, 3)
	fill(t, c.cli, "k", 50, 100)
	c.Kill(c.Members[1])
	c.Kill(c.Members[2])
	one := clientFor(t, c.Members[0].ClientURL)
	waitNoLeader(t, one)
	return c, one
}

// A member that lost its leader for a moment (an election, a short partition: the fault campaign
// partitioned one during a backup, which then failed) is waited for: the save goes ahead once it
// has a leader again.
func TestSaveWaitsForALeader(t *testing.T) {
	ctx := tctx(t)
	store := volume(t)
	c, one := quorumLost(t)
	go func() {
		time.Sleep(2 * time.Second)
		c.Restart(c.Members[1])
	}()
	opts := saveOpts(CompressionZstd)
	start := time.Now()
	m, err := Save(ctx, one, store, opts)
	if err != nil || m.Revision == 0 {
		t.Fatalf("a member whose quorum came back after 2s: %+v, %v", m, err)
	}
	if waited := time.Since(start); waited < 2*time.Second {
		t.Errorf("saved after %s, before quorum came back", waited)
	}
}

// A failed upload (a bucket that does not exist) fails the save and stores nothing.
func TestSaveToAMissingBucketStoresNothing(t *testing.T) {
	ctx := tctx(t)
	_, cli := startEtcd(t)
	fill(t, cli, "k", 100, 1000)
	srv := s3test.Start(t)
	s3, err := objstore.NewS3(objstore.S3Config{Endpoint: srv.Endpoint, Bucket: "missing", Region: "us-east-1", ForcePathStyle: true,
		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.Secret, MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Save(ctx, cli, s3, saveOpts(CompressionZstd)); err == nil || !strings.Contains(err.Error(), "bucket missing does not exist") {
		t.Errorf("Save = %v", err)
	}
}

// waitNoLeader waits until the member noticed it lost its peers (an election timeout).
func waitNoLeader(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if st, err := cli.Status(tctx(t), cli.Endpoints()[0]); err == nil && st.Leader == 0 {
			return
		}
	}
	t.Fatal("the surviving member still reports a leader after 20s")
}
