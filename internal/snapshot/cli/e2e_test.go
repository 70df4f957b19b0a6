package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-steward/steward/internal/etcdtest"
	"github.com/etcd-steward/steward/internal/objstore"
	"github.com/etcd-steward/steward/internal/objstore/s3test"
	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/internal/snapshot"
	"github.com/etcd-steward/steward/internal/snapshot/snaptest"
)

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// tlsClient dials the TLS member with the client certificate in its directory.
func tlsClient(t *testing.T, m snaptest.TLSMember) *clientv3.Client {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(m.Dir, "tls.crt"), filepath.Join(m.Dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.URL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		TLS: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pki.Pool([]*x509.Certificate{m.CA.Cert}), Certificates: []tls.Certificate{cert}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func num(t *testing.T, r run, field string) int64 {
	t.Helper()
	f, ok := r.result[field].(float64)
	if !ok {
		t.Fatalf("result has no number %q: %s", field, r.raw)
	}
	return int64(f)
}

// The subcommands end to end, in process: a member serving mutual TLS with Steward's own
// certificates, a real S3 server, credentials from the environment only.
func TestSaveFetchVerifyWithTLSAndS3(t *testing.T) {
	ctx := tctx(t)
	member := snaptest.StartTLS(t)
	etcdCli := tlsClient(t, member)
	snaptest.Fill(ctx, t, etcdCli, "k", 400, 1000)
	srv := s3test.Start(t)
	env := map[string]string{"AWS_ACCESS_KEY_ID": srv.AccessKey, "AWS_SECRET_ACCESS_KEY": srv.Secret, "GOMEMLIMIT": "off"}
	s3Flags := []string{"--s3-endpoint", srv.Endpoint, "--s3-bucket", srv.Bucket, "--s3-prefix", "steward",
		"--s3-region", "us-east-1", "--s3-force-path-style", "--namespace", "db", "--cluster", "demo", "--backup", "nightly"}
	tlsFlags := []string{"--endpoint", member.URL, "--cacert", filepath.Join(member.Dir, "ca.crt"),
		"--cert", filepath.Join(member.Dir, "tls.crt"), "--key", filepath.Join(member.Dir, "tls.key")}
	live, err := etcdCli.Get(ctx, "probe")
	if err != nil {
		t.Fatal(err)
	}

	save := runCLI(t, env, append(append([]string{"save"}, tlsFlags...), s3Flags...)...)
	if save.code != 0 || save.result["location"] != "s3://backups/steward/db/demo/nightly/snapshot.db.zst" ||
		num(t, save, "revision") != live.Header.Revision || save.result["compression"] != "zstd" || save.result["sha256"] == "" {
		t.Fatalf("save: exit %d, %s\nstderr: %s", save.code, save.raw, save.stderr)
	}
	if save.result["key"] != "steward/db/demo/nightly/snapshot.db.zst" {
		t.Errorf("save result key %v", save.result["key"])
	}
	if len(save.raw) > MaxResult {
		t.Errorf("save result is %d bytes", len(save.raw))
	}
	for _, out := range []string{save.stdout, save.stderr, string(save.raw)} {
		if strings.Contains(out, srv.Secret) {
			t.Fatal("the secret key appears in the output")
		}
	}
	store, err := objstore.NewS3(objstore.S3Config{Endpoint: srv.Endpoint, Bucket: srv.Bucket, Prefix: "steward", Region: "us-east-1",
		ForcePathStyle: true, AccessKeyID: srv.AccessKey, SecretAccessKey: srv.Secret})
	if err != nil {
		t.Fatal(err)
	}
	m, err := snapshot.ReadManifest(ctx, store, "db/demo/nightly")
	if err != nil || m.SHA256 != save.result["sha256"] || m.Backup != "nightly" {
		t.Errorf("manifest in the bucket: %+v, %v", m, err)
	}

	out := filepath.Join(t.TempDir(), "restore", "snapshot.db")
	fetch := runCLI(t, env, append([]string{"fetch", "--out", out, "--max-minor", "3.7", "--expect-sha256", m.SHA256}, s3Flags...)...)
	if fetch.code != 0 || fetch.result["skipped"] != false || num(t, fetch, "revision") != m.Revision || fetch.result["etcdHash"] != true {
		t.Fatalf("fetch: exit %d, %s\nstderr: %s", fetch.code, fetch.raw, fetch.stderr)
	}
	if st, err := os.Stat(out); err != nil || st.Size() != m.RawSize {
		t.Errorf("fetched file: %v, %v", st, err)
	}
	again := runCLI(t, env, append([]string{"fetch", "--out", out + ".2", "--skip-if-exists", out}, s3Flags...)...)
	if again.code != 0 || again.result["skipped"] != true {
		t.Errorf("fetch with an existing data dir: exit %d, %s", again.code, again.raw)
	}

	verify := runCLI(t, env, append([]string{"verify", "--etcd", snaptest.Etcd(t), "--etcdutl", snaptest.Etcdutl(t),
		"--work-dir", t.TempDir(), "--max-minor", "3.7"}, s3Flags...)...)
	if verify.code != 0 || verify.result["verified"] != true || num(t, verify, "revision") != m.Revision+1_000_000_000 {
		t.Fatalf("verify: exit %d, %s\nstderr: %s", verify.code, verify.raw, verify.stderr)
	}
	t.Logf("results:\n%s%s%s", save.raw, fetch.raw, verify.raw)

	del := runCLI(t, env, append([]string{"delete"}, s3Flags...)...)
	if del.code != 0 || fmt.Sprint(del.result["deleted"]) != "[db/demo/nightly/manifest.json db/demo/nightly/snapshot.db.zst]" {
		t.Errorf("delete: exit %d, %s", del.code, del.raw)
	}
	if left, err := store.List(ctx, "db/"); err != nil || len(left) != 0 {
		t.Errorf("after delete: %v, %v", left, err)
	}
	if again := runCLI(t, env, append([]string{"delete"}, s3Flags...)...); again.code != 0 {
		t.Errorf("deleting again: exit %d, %s", again.code, again.raw)
	}
}

// Plain etcd to a volume, uncompressed; and the errors a Job would report.
func TestSaveToAVolumeAndFailures(t *testing.T) {
	c := etcdtest.Start(t, 1)
	vol := t.TempDir()
	env := map[string]string{"GOMEMLIMIT": "off"}
	save := runCLI(t, env, "save", "--endpoint", c.Members[0].ClientURL, "--volume-dir", vol, "--backup-key", "db/demo/manual", "--compression", "none")
	if save.code != 0 || save.result["location"] != "file://"+filepath.ToSlash(vol)+"/db/demo/manual/snapshot.db" {
		t.Fatalf("save: exit %d, %s\n%s", save.code, save.raw, save.stderr)
	}
	verify := runCLI(t, env, "verify", "--volume-dir", vol, "--backup-key", "db/demo/manual", "--etcd", snaptest.Etcd(t),
		"--etcdutl", snaptest.Etcdutl(t), "--work-dir", t.TempDir(), "--bump-revision", "0")
	if verify.code != 0 || verify.result["verified"] != true || num(t, verify, "revision") != num(t, save, "revision") {
		t.Errorf("verify without bump: exit %d, %s", verify.code, verify.raw)
	}

	srv := s3test.Start(t)
	wrong := "wrong-" + srv.Secret
	bad := runCLI(t, map[string]string{"AWS_ACCESS_KEY_ID": srv.AccessKey, "AWS_SECRET_ACCESS_KEY": wrong, "GOMEMLIMIT": "off"},
		"save", "--endpoint", c.Members[0].ClientURL, "--s3-endpoint", srv.Endpoint, "--s3-bucket", srv.Bucket,
		"--s3-region", "us-east-1", "--s3-force-path-style", "--backup-key", "db/demo/x")
	if bad.code != 1 || !strings.Contains(fmt.Sprint(bad.result["error"]), "S3 refused the credentials") {
		t.Errorf("wrong secret: exit %d, %s", bad.code, bad.raw)
	}
	if strings.Contains(bad.stdout+bad.stderr+string(bad.raw), wrong) {
		t.Error("the wrong secret appears in the output")
	}

	c.Kill(c.Members[0])
	down := runCLI(t, env, "save", "--endpoint", c.Members[0].ClientURL, "--volume-dir", vol, "--backup-key", "db/demo/down")
	if down.code != 1 || !strings.Contains(fmt.Sprint(down.result["error"]), "did not answer its status") {
		t.Errorf("member down: exit %d, %s", down.code, down.raw)
	}
	missing := runCLI(t, env, "fetch", "--volume-dir", vol, "--backup-key", "db/demo/none", "--out", filepath.Join(t.TempDir(), "x"))
	if missing.code != 1 || !strings.Contains(fmt.Sprint(missing.result["error"]), "no snapshot at file://") {
		t.Errorf("missing backup: exit %d, %s", missing.code, missing.raw)
	}
}
