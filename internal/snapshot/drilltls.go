package snapshot

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/etcd-steward/steward/internal/pki"
)

// drillTLS is what the throwaway member of a drill serves and is read with: a CA of its own, a
// serving certificate for localhost, and a client certificate named root. A backup of a cluster
// with etcd authentication on restores its users and roles with the data, auth on, and only root
// may read the whole keyspace and list users; a certificate names its user without a password
// (etcd maps its common name to the user under --client-cert-auth) and a password is nowhere to be
// had in a drill. With auth off the name is ignored. It lives as long as the drill's directory.
type drillTLS struct {
	caFile, certFile, keyFile string
	client                    *tls.Config
}

// drillLifetime bounds the drill's certificates; a drill that outlives it has failed long before.
const drillLifetime = 24 * time.Hour

func newDrillTLS(dir string, now time.Time) (*drillTLS, error) {
	ca, err := pki.NewCA("restore-drill", "steward", now, drillLifetime)
	if err != nil {
		return nil, err
	}
	server, err := ca.IssueLoopback("restore-drill", now, drillLifetime)
	if err != nil {
		return nil, err
	}
	root, err := ca.IssueClient("root", now, drillLifetime)
	if err != nil {
		return nil, err
	}
	serverKey, err := pki.EncodeKeyPEM(server.Key)
	if err != nil {
		return nil, err
	}
	rootKey, err := pki.EncodeKeyPEM(root.Key)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(pki.EncodeCertPEM(root.Cert), rootKey)
	if err != nil {
		return nil, err
	}
	t := &drillTLS{caFile: filepath.Join(dir, "drill-ca.crt"), certFile: filepath.Join(dir, "drill-server.crt"),
		keyFile: filepath.Join(dir, "drill-server.key"),
		client: &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pki.Pool([]*x509.Certificate{ca.Cert}),
			MinVersion: tls.VersionTLS12}}
	for path, data := range map[string][]byte{t.caFile: ca.CertPEM(), t.certFile: pki.EncodeCertPEM(server.Cert), t.keyFile: serverKey} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, fmt.Errorf("the drill's TLS files: %w", err)
		}
	}
	return t, nil
}

// args are the restored member's flags for its client listener.
func (t *drillTLS) args() []string {
	return []string{"--cert-file=" + t.certFile, "--key-file=" + t.keyFile, "--trusted-ca-file=" + t.caFile, "--client-cert-auth"}
}
