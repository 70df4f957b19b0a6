// Package snaptest holds test helpers for snapshots: the etcdutl binary, a real etcd member
// serving mutual TLS as Steward's clusters do, and filling a member with data.
package snaptest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-steward/steward/internal/etcdtest"
	"github.com/etcd-steward/steward/internal/pki"
)

// Etcdutl finds etcdutl for the etcd that tests run: $ETCDUTL_BIN, else next to the etcd binary
// (hack/toolchain.sh builds etcdutl with etcd and links both into _out/envtest), else the
// repository's _out/envtest/etcdutl. It fails the test, saying how to get it, when there is none.
func Etcdutl(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("ETCDUTL_BIN"); b != "" {
		if _, err := os.Stat(b); err != nil {
			t.Fatalf("ETCDUTL_BIN: %v", err)
		}
		return b
	}
	var candidates []string
	if etcd, err := etcdtest.Binary(); err == nil {
		candidates = append(candidates, filepath.Join(filepath.Dir(etcd), "etcdutl"))
		if real, err := filepath.EvalSymlinks(etcd); err == nil {
			candidates = append(candidates, filepath.Join(filepath.Dir(real), "etcdutl"))
		}
	}
	_, file, _, _ := runtime.Caller(0)
	candidates = append(candidates, filepath.Join(filepath.Dir(file), "..", "..", "..", "_out", "envtest", "etcdutl"))
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && !st.IsDir() {
			return c
		}
	}
	t.Fatalf("no etcdutl binary (looked at %v): run `hack/toolchain.sh envtest` (it builds etcdutl with etcd), "+
		"or build go.etcd.io/etcd/etcdutl/v3 at the etcd version of hack/etcd and set ETCDUTL_BIN", candidates)
	return ""
}

// Etcd is the etcd server binary tests run.
func Etcd(t testing.TB) string {
	t.Helper()
	b, err := etcdtest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TLSMember is one etcd member serving its client port with mutual TLS.
type TLSMember struct {
	URL string
	// Dir holds ca.crt, and tls.crt/tls.key of a client certificate, as a client Secret mounts.
	Dir string
	CA  *pki.CA
}

// StartTLS runs one etcd member with certificates from a fresh cluster CA (the server leaf is the
// one Steward issues, naming 127.0.0.1) that demands client certificates.
func StartTLS(t testing.TB) TLSMember {
	t.Helper()
	now := time.Now()
	ca, err := pki.NewCA("demo", "db", now.Add(-time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.IssueServer(pki.MemberNames{Cluster: "demo", Namespace: "db", Member: "demo-0"}, now.Add(-time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.IssueClient("steward-backup", now.Add(-time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(l *pki.Leaf, cert, key string) {
		m, err := l.Material(ca.Cert)
		if err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{cert: m.Cert, key: m.Key, "ca.crt": m.CA} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(server, "server.crt", "server.key")
	write(client, "tls.crt", "tls.key")

	return TLSMember{URL: etcdtest.StartTLS(t, Etcd(t), dir), Dir: dir, CA: ca}
}

// Fill writes n keys under prefix with values of size bytes: runs of random bytes and of text,
// so that compression has work to do and halves them, about what it does to Kubernetes objects.
func Fill(ctx context.Context, t testing.TB, cli *clientv3.Client, prefix string, n, size int) {
	t.Helper()
	rnd := rand.New(rand.NewPCG(uint64(n), uint64(size)))
	val := make([]byte, size)
	for i := range n {
		for j := range val {
			if j/64%2 == 0 {
				val[j] = byte(rnd.Uint32())
			} else {
				val[j] = "kind: ConfigMap metadata: name: "[j%32]
			}
		}
		if _, err := cli.Put(ctx, fmt.Sprintf("%s/%06d", prefix, i), string(val)); err != nil {
			t.Fatal(err)
		}
	}
}
