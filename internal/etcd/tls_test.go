package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/pki"
)

// mtlsServer serves TLS on a local port the way etcd's peer port does: it presents leaf and
// demands a client certificate signed by ca, which the caller of PresentedCertificate does not
// have. Every handshake's server-side error is sent on the returned channel.
func mtlsServer(t *testing.T, ca *pki.CA, leaf *pki.Leaf, maxVersion uint16) (string, <-chan error) {
	t.Helper()
	cfg := &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{leaf.Cert.Raw}, PrivateKey: leaf.Key, Leaf: leaf.Cert}},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pki.Pool([]*x509.Certificate{ca.Cert}),
		MinVersion:   tls.VersionTLS12,
		MaxVersion:   maxVersion,
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	errs := make(chan error, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			err = c.(*tls.Conn).Handshake()
			if err == nil {
				// TLS 1.3: the server only sees the (missing) client certificate after the client
				// finished, so read once to have the handshake complete on this side.
				_, err = c.Read(make([]byte, 1))
			}
			_ = c.Close()
			select {
			case errs <- err:
			default:
			}
		}
	}()
	return l.Addr().String(), errs
}

func TestPresentedCertificate(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA("etcd", "db", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.IssuePeer(pki.MemberNames{Cluster: "etcd", Namespace: "db", Member: "etcd-0"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		version uint16
	}{{"TLS 1.2", tls.VersionTLS12}, {"TLS 1.3", tls.VersionTLS13}} {
		t.Run("server demanding a client certificate, "+tt.name, func(t *testing.T) {
			addr, errs := mtlsServer(t, ca, leaf, tt.version)
			got, err := PresentedCertificate(tctx(t), addr)
			if err != nil {
				t.Fatalf("PresentedCertificate: %v", err)
			}
			if pki.Fingerprint(got) != pki.Fingerprint(leaf.Cert) {
				t.Errorf("got %q (serial %x), want the server's leaf %q (serial %x)", got.Subject.CommonName, got.SerialNumber, leaf.Cert.Subject.CommonName, leaf.Cert.SerialNumber)
			}
			// And the server did refuse us: the leaf was read without ever being let in.
			select {
			case serr := <-errs:
				if serr == nil {
					t.Error("the server accepted a connection without a client certificate")
				}
			case <-time.After(10 * time.Second):
				t.Error("the server saw no handshake")
			}
		})
	}

	for name, answer := range map[string][]byte{
		"plain TCP listener":           []byte("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n"), // not TLS
		"listener that closes at once": nil,
	} {
		t.Run(name, func(t *testing.T) {
			addr := rawListener(t, answer)
			if got, err := PresentedCertificate(tctx(t), addr); err == nil || got != nil {
				t.Fatalf("certificate %v, error %v; want an error and no certificate", got, err)
			}
		})
	}

	t.Run("nothing listening", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		got, err := PresentedCertificate(tctx(t), addr)
		if err == nil || got != nil {
			t.Fatalf("certificate %v, error %v; want an error", got, err)
		}
		var op *net.OpError
		if !errors.As(err, &op) {
			t.Errorf("error %v does not carry the dial error", err)
		}
	})

	t.Run("context already cancelled", func(t *testing.T) {
		addr, _ := mtlsServer(t, ca, leaf, tls.VersionTLS13)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if got, err := PresentedCertificate(ctx, addr); err == nil || got != nil {
			t.Fatalf("certificate %v, error %v; want an error", got, err)
		}
	})
}

// rawListener accepts TCP connections, writes answer to each and closes it.
func rawListener(t *testing.T, answer []byte) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write(answer)
			_ = c.Close()
		}
	}()
	return l.Addr().String()
}

// Served completes a verified handshake with the credentials' client certificate: it returns the
// member's leaf when the chain is trusted, and refuses a server whose CA it does not trust.
func TestServed(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA("etcd", "db", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("etcd", "db", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.IssueServer(pki.MemberNames{Cluster: "etcd", Namespace: "db", Member: "etcd-0"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.IssueClient("steward-operator", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := mtlsServer(t, ca, leaf, tls.VersionTLS13)
	certs := []tls.Certificate{{Certificate: [][]byte{client.Cert.Raw}, PrivateKey: client.Key, Leaf: client.Cert}}

	var creds Credentials
	creds.Set([]*x509.Certificate{ca.Cert}, certs)
	got, err := Served(tctx(t), addr, &creds)
	if err != nil || pki.Fingerprint(got) != pki.Fingerprint(leaf.Cert) {
		t.Fatalf("trusted member: leaf %v, error %v", got != nil, err)
	}
	creds.Set([]*x509.Certificate{other.Cert}, certs)
	if got, err := Served(tctx(t), addr, &creds); err == nil || got != nil {
		t.Fatalf("untrusted member: leaf %v, error %v; want a refusal", got != nil, err)
	}
}
