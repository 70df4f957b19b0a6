package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-steward/steward/internal/etcdtest"
	"github.com/etcd-steward/steward/internal/pki"
)

// A real etcd mid-rotation (trusting both CAs, serving a new-signed leaf with the new CA
// cross-signed by the old after it) serves a client that loaded its files before the rotation:
// it trusts only the old CA and presents an old-signed certificate, as a kube-apiserver does
// until it restarts. Without the cross-signed certificate the same client is refused, and etcd
// re-reads its certificate file per handshake, so one process shows both.
func TestRealEtcdServesOldOnlyClientThroughCrossSignedCA(t *testing.T) {
	bin, err := etcdtest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	old, err := pki.NewCA("etcd", "db", now.Add(-time.Hour), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	next, err := pki.NewCA("etcd", "db", now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cross, err := old.CrossSign(next.Cert)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := next.IssueServer(pki.MemberNames{Cluster: "etcd", Namespace: "db", Member: "etcd-0"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeMaterial := func(l *pki.Leaf) {
		t.Helper()
		m, err := l.Material(old.Cert, next.Cert)
		if err != nil {
			t.Fatal(err)
		}
		for name, data := range map[string][]byte{"server.crt": m.Cert, "server.key": m.Key, "ca.crt": m.CA} {
			// Written aside and renamed, as the kubelet swaps a Secret volume: never half a file.
			if err := os.WriteFile(filepath.Join(dir, name+".tmp"), data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(dir, name+".tmp"), filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	writeMaterial(leaf.WithChain(cross))
	url := startTLSEtcd(t, bin, dir)

	client, err := old.IssueClient("kube-apiserver", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	oldOnly := &tls.Config{RootCAs: pki.Pool([]*x509.Certificate{old.Cert}), MinVersion: tls.VersionTLS12,
		Certificates: []tls.Certificate{{Certificate: [][]byte{client.Cert.Raw}, PrivateKey: client.Key}}}
	if err := putWith(url, oldOnly); err != nil {
		t.Fatalf("a client trusting only the old CA is refused by a member serving the cross-signed CA: %v", err)
	}
	writeMaterial(leaf)
	if err := putWith(url, oldOnly); err == nil {
		t.Fatal("without the cross-signed CA the old-only client was still served: the check above proves nothing")
	}
}

func putWith(url string, tc *tls.Config) error {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, TLS: tc, DialTimeout: 3 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = c.Put(ctx, "/cross", "signed")
	return err
}

// startTLSEtcd runs one etcd member with mutual TLS on its client port, from the files in dir.
func startTLSEtcd(t *testing.T, bin, dir string) string {
	t.Helper()
	ports := make([]int, 3)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	url, peer := fmt.Sprintf("https://127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	cmd := exec.Command(bin, "--name=m0", "--data-dir="+filepath.Join(dir, "data"),
		"--listen-client-urls="+url, "--advertise-client-urls="+url,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer, "--initial-cluster=m0="+peer,
		fmt.Sprintf("--listen-metrics-urls=http://127.0.0.1:%d", ports[2]), "--log-level=error",
		"--client-cert-auth", "--trusted-ca-file="+filepath.Join(dir, "ca.crt"),
		"--cert-file="+filepath.Join(dir, "server.crt"), "--key-file="+filepath.Join(dir, "server.key"))
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = logf.Close() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", ports[2]), time.Second)
		if err == nil {
			_ = c.Close()
			return url
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd did not start (log %s): %v", logf.Name(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
