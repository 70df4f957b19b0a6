package framework

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-steward/steward/internal/pki"
)

// Defaults of (*Framework).ClientTLS: how often the Secret is re-read, and how long the first
// load may take before the test fails.
const (
	ClientTLSPollInterval = 500 * time.Millisecond
	ClientTLSLoadTimeout  = time.Minute
)

// TLSSource returns the current content of a client TLS Secret (tls.crt, tls.key, ca.crt).
type TLSSource func(ctx context.Context) (pki.Material, error)

// SecretTLSSource reads the Secret ns/name through c on every call.
func SecretTLSSource(c client.Client, ns, name string) TLSSource {
	return func(ctx context.Context) (pki.Material, error) {
		var s corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
			return pki.Material{}, fmt.Errorf("secret %s/%s: %w", ns, name, err)
		}
		return pki.Material{Cert: s.Data[pki.KeyCert], Key: s.Data[pki.KeyKey], CA: s.Data[pki.KeyCA]}, nil
	}
}

// ClientTLS holds the material of one client Secret and follows it: the operator renews the
// client certificate and, during a CA rotation, changes the trust bundle. Configs built by Config
// read the latest material on every handshake, so clients never need rebuilding.
type ClientTLS struct {
	source TLSSource

	mu      sync.RWMutex
	raw     pki.Material // as last loaded, to tell a change from a re-read
	cert    *tls.Certificate
	roots   *x509.CertPool
	loaded  bool
	reloads int
	lastErr error
}

// NewClientTLS loads the material from source, re-reads it every interval in a goroutine that
// t.Cleanup stops, and waits (at most timeout) for the first successful load, failing the test if
// none comes. Zero durations take the ClientTLS* defaults.
func NewClientTLS(t testing.TB, source TLSSource, interval, timeout time.Duration) *ClientTLS {
	t.Helper()
	if interval <= 0 {
		interval = ClientTLSPollInterval
	}
	if timeout <= 0 {
		timeout = ClientTLSLoadTimeout
	}
	c := &ClientTLS{source: source}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	first := make(chan struct{})
	go c.poll(ctx, interval, first, done)
	t.Cleanup(func() { cancel(); <-done })

	select {
	case <-first:
		return c
	case <-time.After(timeout):
		t.Fatalf("client TLS material not loaded after %s: %v", timeout, c.LastError())
		return nil
	}
}

// ClientTLS follows the client TLS Secret ns/secret (resources.ClientTLSSecretName), re-reading
// it every ClientTLSPollInterval until the test ends.
func (f *Framework) ClientTLS(t testing.TB, ns, secret string) *ClientTLS {
	t.Helper()
	return NewClientTLS(t, SecretTLSSource(f.Client, ns, secret), ClientTLSPollInterval, ClientTLSLoadTimeout)
}

// poll reloads every interval until ctx ends, closing first after the first successful load.
func (c *ClientTLS) poll(ctx context.Context, interval time.Duration, first, done chan struct{}) {
	defer close(done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.Reload(rctx)
		cancel()
		if err == nil && first != nil {
			close(first)
			first = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Reload reads the source once and installs its material if it differs from what is held. It
// reports whether it changed; on an error (unreadable or invalid material) the previous material
// stays in use.
func (c *ClientTLS) Reload(ctx context.Context) (changed bool, err error) {
	defer func() {
		c.mu.Lock()
		c.lastErr = err
		c.mu.Unlock()
	}()
	m, err := c.source(ctx)
	if err != nil {
		return false, err
	}
	c.mu.RLock()
	same := c.loaded && sameMaterial(c.raw, m)
	c.mu.RUnlock()
	if same {
		return false, nil
	}
	cert, roots, err := parseClientMaterial(m)
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loaded && sameMaterial(c.raw, m) { // a concurrent Reload installed it first
		return false, nil
	}
	if c.loaded {
		c.reloads++
	}
	c.raw = pki.Material{Cert: bytes.Clone(m.Cert), Key: bytes.Clone(m.Key), CA: bytes.Clone(m.CA)}
	c.cert, c.roots, c.loaded = cert, roots, true
	return true, nil
}

func sameMaterial(a, b pki.Material) bool {
	return bytes.Equal(a.Cert, b.Cert) && bytes.Equal(a.Key, b.Key) && bytes.Equal(a.CA, b.CA)
}

func parseClientMaterial(m pki.Material) (*tls.Certificate, *x509.CertPool, error) {
	if len(m.Cert) == 0 || len(m.Key) == 0 || len(m.CA) == 0 {
		return nil, nil, fmt.Errorf("incomplete client TLS material: %s %d bytes, %s %d bytes, %s %d bytes",
			pki.KeyCert, len(m.Cert), pki.KeyKey, len(m.Key), pki.KeyCA, len(m.CA))
	}
	cert, err := tls.X509KeyPair(m.Cert, m.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("%s/%s: %w", pki.KeyCert, pki.KeyKey, err)
	}
	cas, err := pki.ParseBundle(m.CA)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", pki.KeyCA, err)
	}
	return &cert, pki.Pool(cas), nil
}

// Reloads is how many times the material changed after the first load.
func (c *ClientTLS) Reloads() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.reloads
}

// Current reads the source once and says whether the material in use is what it holds now: a
// client that reloads has caught up with the Secret.
func (c *ClientTLS) Current(ctx context.Context) (bool, error) {
	m, err := c.source(ctx)
	if err != nil {
		return false, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.loaded && sameMaterial(c.raw, m), nil
}

// LastError is the error of the last failed load, nil when the last load succeeded.
func (c *ClientTLS) LastError() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.lastErr
}

// Config is a client TLS configuration that presents the latest client certificate and verifies
// the server's chain against the latest ca.crt. With serverName != "" the server certificate must
// also name it (dial the client Service as "<cluster>-client.<ns>.svc"); with "" only the chain
// is checked, for dialling members by Pod IP, which no member certificate names.
func (c *ClientTLS) Config(serverName string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: serverName,
		// Verification is not skipped but done in VerifyConnection, against the roots of the
		// moment rather than a pool frozen into the config.
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			return c.verify(cs, serverName)
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c.mu.RLock()
			defer c.mu.RUnlock()
			if c.cert == nil {
				return &tls.Certificate{}, nil // let the server refuse it, with its own error
			}
			return c.cert, nil
		},
	}
}

func (c *ClientTLS) verify(cs tls.ConnectionState, serverName string) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the server presented no certificate")
	}
	c.mu.RLock()
	roots := c.roots
	c.mu.RUnlock()
	if roots == nil {
		return errors.New("no client TLS material loaded yet")
	}
	inter := x509.NewCertPool()
	for _, ic := range cs.PeerCertificates[1:] {
		inter.AddCert(ic)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		DNSName:       serverName, // "" skips the hostname check
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err
}
