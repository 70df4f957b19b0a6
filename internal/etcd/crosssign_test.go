package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
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
	url := etcdtest.StartTLS(t, bin, dir)

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
