//go:build e2e

package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/resources"
	"github.com/etcd-steward/steward/test/e2e/framework"
)

// TLS helpers of the cluster tests (clientFor and monitor use them): operator clusters run mutual
// TLS unless spec.tls.enabled is false.

// clientServiceHost is the name of the client Service that member server certificates carry.
func clientServiceHost(ns, name string) string {
	return resources.ClientServiceName(name) + "." + ns + ".svc"
}

// tlsEnabled reports whether the cluster runs TLS (the default) as its spec says now.
func tlsEnabled(t testing.TB, ns, name string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ec, err := get(ctx, ns, name)
	if err != nil {
		t.Fatalf("reading EtcdCluster %s/%s: %v", ns, name, err)
	}
	return ec.TLSEnabled()
}

// clientTLSFor follows the cluster's client TLS Secret for the rest of the test. One follower per
// test and cluster: each polls the API server, and tests ask for clients many times.
func clientTLSFor(t testing.TB, ns, name string) *framework.ClientTLS {
	t.Helper()
	key := clientTLSKey{t, ns, name}
	clientTLSMu.Lock()
	c, ok := clientTLSCache[key]
	clientTLSMu.Unlock()
	if ok {
		return c
	}
	// Not under the lock: the first load may take a while, and other tests must not wait for it.
	c = f.ClientTLS(t, ns, resources.ClientTLSSecretName(name))
	clientTLSMu.Lock()
	defer clientTLSMu.Unlock()
	if prev, ok := clientTLSCache[key]; ok {
		return prev // a concurrent call of the same test won; this one stops at cleanup
	}
	clientTLSCache[key] = c
	t.Cleanup(func() {
		clientTLSMu.Lock()
		defer clientTLSMu.Unlock()
		delete(clientTLSCache, key)
	})
	return c
}

type clientTLSKey struct {
	t        testing.TB
	ns, name string
}

var (
	clientTLSMu    sync.Mutex
	clientTLSCache = map[clientTLSKey]*framework.ClientTLS{}
)
