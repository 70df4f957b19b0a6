package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"sync"
)

// Credentials are the TLS material Steward presents to and expects from one cluster's members.
// They are read on every handshake, so Set takes effect on the next connection without
// redialling: a renewal or CA rotation never needs an operator restart.
type Credentials struct {
	mu    sync.RWMutex
	roots *x509.CertPool
	certs []tls.Certificate
}

// Set replaces the trusted CAs and the client certificates (one per CA the members may trust: a
// member picks by the CAs it accepts, see clientCert).
func (c *Credentials) Set(roots []*x509.Certificate, certs []tls.Certificate) {
	pool := x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.roots, c.certs = pool, certs
}

// Certs are the client certificates in use.
func (c *Credentials) Certs() []tls.Certificate {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.certs
}

// Config is the client TLS configuration. Members are dialled by Pod IP, which no member
// certificate names (Pod IPs change on every restart), so the hostname check is replaced by a
// chain check against the cluster's own CAs: only that cluster's members hold leaves they signed
// for server use.
func (c *Credentials) Config() *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS12,
		InsecureSkipVerify:   true, //nolint:gosec // the chain is verified in VerifyConnection
		VerifyConnection:     c.verify,
		GetClientCertificate: c.clientCert,
	}
}

func (c *Credentials) verify(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("etcd member presented no certificate")
	}
	c.mu.RLock()
	roots := c.roots
	c.mu.RUnlock()
	if roots == nil {
		return errors.New("no trusted CA for this cluster yet")
	}
	inter := x509.NewCertPool()
	for _, ic := range cs.PeerCertificates[1:] {
		inter.AddCert(ic)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

// clientCert presents the certificate signed by a CA the member accepts. During a CA rotation a
// member trusts the old CA, both, or the new one depending on when it started; the handshake's
// list of acceptable CAs says which, so Steward talks to every member at every step.
func (c *Credentials) clientCert(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i := range c.certs {
		if cri.SupportsCertificate(&c.certs[i]) == nil {
			return &c.certs[i], nil
		}
	}
	if len(c.certs) > 0 {
		return &c.certs[0], nil // let the member refuse it, with its own error
	}
	return &tls.Certificate{}, nil
}

// Served is the leaf certificate a member presents on addr (host:port) now, over a handshake
// verified as Steward's own connections are. Renewals are checked with it: a renewed leaf counts
// once the member serves it.
func Served(ctx context.Context, addr string, creds *Credentials) (*x509.Certificate, error) {
	return presented(ctx, addr, creds.Config(), true)
}

// PresentedCertificate is the leaf a TLS server presents on addr, unverified: for comparing it
// with what it should serve, never for trusting the connection (which is closed at once). It is
// taken as it arrives, before Steward would have to present a certificate of its own, so a server
// that then refuses the handshake still shows it.
func PresentedCertificate(ctx context.Context, addr string) (*x509.Certificate, error) {
	return presented(ctx, addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, false) //nolint:gosec // read only
}

// presented dials addr with cfg, records the leaf the server sends, and closes the connection.
// With complete, the handshake must succeed too.
func presented(ctx context.Context, addr string, cfg *tls.Config, complete bool) (*x509.Certificate, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var got *x509.Certificate
	cfg = cfg.Clone()
	cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return nil
		}
		c, err := x509.ParseCertificate(raw[0])
		got = c
		return err
	}
	d := tls.Dialer{NetDialer: &net.Dialer{}, Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		_ = conn.Close()
	}
	switch {
	case complete && err != nil:
		return nil, err
	case got == nil:
		return nil, errors.Join(errors.New("no certificate presented"), err)
	}
	return got, nil
}
