package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/pki"
)

// The name member certificates of cluster db in namespace ns carry for the client Service.
const tlsTestServiceHost = "db-client.ns.svc"

// clusterPKI is one cluster CA with a member server leaf and an application client leaf.
type clusterPKI struct {
	ca             *pki.CA
	server, client *pki.Leaf
}

func newClusterPKI(t *testing.T) clusterPKI {
	t.Helper()
	now := time.Now()
	ca, err := pki.NewCA("db", "ns", now, 0)
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.IssueServer(pki.MemberNames{Cluster: "db", Namespace: "ns", Member: "db-0"}, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.IssueClient("e2e", now, 0)
	if err != nil {
		t.Fatal(err)
	}
	return clusterPKI{ca: ca, server: server, client: client}
}

// clientMaterial is what the operator's client Secret would hold, trusting the given CAs.
func (p clusterPKI) clientMaterial(t *testing.T, trust ...*pki.CA) pki.Material {
	t.Helper()
	var certs []*x509.Certificate
	for _, ca := range trust {
		certs = append(certs, ca.Cert)
	}
	m, err := p.client.Material(certs...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// serverConfig serves p's server leaf and requires client certificates signed by trust.
func (p clusterPKI) serverConfig(t *testing.T, trust ...*pki.CA) *tls.Config {
	t.Helper()
	key, err := pki.EncodeKeyPEM(p.server.Key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(pki.EncodeCertPEM(p.server.Cert), key)
	if err != nil {
		t.Fatal(err)
	}
	var cas []*x509.Certificate
	for _, ca := range trust {
		cas = append(cas, ca.Cert)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pki.Pool(cas)}
}

// tlsServer accepts mutual-TLS connections on 127.0.0.1 and writes "ok" after a handshake that
// verified the client; its configuration can be swapped between connections.
type tlsServer struct {
	addr string
	cfg  atomic.Pointer[tls.Config]
}

func startTLSServer(t *testing.T, cfg *tls.Config) *tlsServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &tlsServer{addr: ln.Addr().String()}
	s.cfg.Store(cfg)
	tl := tls.NewListener(ln, &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return s.cfg.Load(), nil
	}})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := tl.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer func() { _ = conn.Close() }()
				_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
				if conn.(*tls.Conn).Handshake() == nil {
					_, _ = conn.Write([]byte("ok"))
				}
			})
		}
	})
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	return s
}

// handshake dials s with cfg and waits for the server's "ok": with TLS 1.3 the client's side of
// the handshake ends before the server has checked the client certificate.
func handshake(s *tlsServer, cfg *tls.Config) error {
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: cfg}
	conn, err := d.Dial("tcp", s.addr)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2)
	if _, err := io.ReadFull(conn, buf); err != nil {
		return fmt.Errorf("the server refused the client: %w", err)
	}
	return nil
}

// swapSource is a TLSSource a test can change under a running ClientTLS.
type swapSource struct {
	mu  sync.Mutex
	m   pki.Material
	err error
}

func (s *swapSource) set(m pki.Material, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m, s.err = m, err
}

func (s *swapSource) get(context.Context) (pki.Material, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m, s.err
}

func TestClientTLSServerName(t *testing.T) {
	p := newClusterPKI(t)
	srv := startTLSServer(t, p.serverConfig(t, p.ca))
	src := &swapSource{m: p.clientMaterial(t, p.ca)}
	c := NewClientTLS(t, src.get, 10*time.Millisecond, 5*time.Second)

	for _, name := range []string{tlsTestServiceHost, "db-client", "localhost", ""} {
		if err := handshake(srv, c.Config(name)); err != nil {
			t.Errorf("server name %q: %v", name, err)
		}
	}
	var hostErr x509.HostnameError
	if err := handshake(srv, c.Config("other-client.ns.svc")); !errors.As(err, &hostErr) {
		t.Errorf("wrong server name: %v, want a hostname error", err)
	}
	if n := c.Reloads(); n != 0 {
		t.Errorf("Reloads = %d with unchanged material, want 0", n)
	}
}

func TestClientTLSFollowsNewCA(t *testing.T) {
	p1, p2 := newClusterPKI(t), newClusterPKI(t)
	srv := startTLSServer(t, p1.serverConfig(t, p1.ca))
	src := &swapSource{m: p1.clientMaterial(t, p1.ca)}
	c := NewClientTLS(t, src.get, 10*time.Millisecond, 5*time.Second)
	cfg := c.Config(tlsTestServiceHost) // built once, used across the change
	if err := handshake(srv, cfg); err != nil {
		t.Fatalf("before the change: %v", err)
	}

	// The server moves to the second CA: the old material neither trusts it nor is trusted.
	srv.cfg.Store(p2.serverConfig(t, p2.ca))
	var unknown x509.UnknownAuthorityError
	if err := handshake(srv, cfg); !errors.As(err, &unknown) {
		t.Fatalf("server on a CA the client does not know yet: %v, want an unknown authority error", err)
	}

	// A source that fails or serves garbage changes nothing.
	src.set(pki.Material{}, errors.New("secret not found"))
	waitFor(t, "the source error to be seen", func() bool { return c.LastError() != nil })
	src.set(pki.Material{Cert: []byte("junk"), Key: []byte("junk"), CA: []byte("junk")}, nil)
	waitFor(t, "the bad material to be refused", func() bool {
		err := c.LastError()
		return err != nil && !strings.Contains(err.Error(), "secret not found")
	})
	if n := c.Reloads(); n != 0 {
		t.Fatalf("Reloads = %d after failed loads, want 0", n)
	}

	src.set(p2.clientMaterial(t, p2.ca), nil)
	waitFor(t, "the new material to be loaded", func() bool { return c.Reloads() == 1 })
	if err := handshake(srv, cfg); err != nil {
		t.Fatalf("after the reload, same config: %v", err)
	}
	if err := c.LastError(); err != nil {
		t.Errorf("LastError = %v after a good load", err)
	}
	time.Sleep(50 * time.Millisecond) // several more polls of the same content
	if n := c.Reloads(); n != 1 {
		t.Errorf("Reloads = %d, want 1: re-reading the same material is no change", n)
	}
}

func TestClientTLSRefusesUntrustedServer(t *testing.T) {
	trusted, rogue := newClusterPKI(t), newClusterPKI(t)
	// The rogue server would even accept the client: only the client's check can refuse it.
	srv := startTLSServer(t, rogue.serverConfig(t, trusted.ca))
	src := &swapSource{m: trusted.clientMaterial(t, trusted.ca)}
	c := NewClientTLS(t, src.get, 10*time.Millisecond, 5*time.Second)
	for _, name := range []string{tlsTestServiceHost, ""} {
		var unknown x509.UnknownAuthorityError
		if err := handshake(srv, c.Config(name)); !errors.As(err, &unknown) {
			t.Errorf("server name %q: %v, want an unknown authority error", name, err)
		}
	}
}

func TestClientTLSFirstLoadTimeout(t *testing.T) {
	src := &swapSource{err: errors.New("secret ns/db-client-tls: not found")}
	ft := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		NewClientTLS(ft, src.get, 10*time.Millisecond, 100*time.Millisecond)
		t.Error("NewClientTLS returned without material")
	}()
	<-done
	for i := len(ft.cleanups) - 1; i >= 0; i-- {
		ft.cleanups[i]() // stops the poller; a hang here fails the test by timeout
	}
	if !strings.Contains(ft.msg, "not loaded") || !strings.Contains(ft.msg, "db-client-tls: not found") {
		t.Errorf("failure message %q should say nothing loaded and why", ft.msg)
	}
}

// fatalTB records Fatalf and ends the goroutine as testing.T does, and collects cleanups.
type fatalTB struct {
	testing.TB
	cleanups []func()
	msg      string
}

func (f *fatalTB) Helper()           {}
func (f *fatalTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
