package manager_test

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/manager"
	"github.com/etcd-steward/steward/internal/testenv"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// TestManagerServesHealth starts the manager exactly as cmd/steward does, against a real
// kube-apiserver, and checks that it wins leader election and answers its probes and metrics.
func TestManagerServesHealth(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })

	var o manager.Options
	fs := flag.NewFlagSet("steward", flag.ContinueOnError)
	o.BindFlags(fs)
	probes, metrics := freeAddr(t), freeAddr(t)
	args := []string{"--leader-elect", "--leader-election-namespace=default",
		"--health-probe-bind-address=" + probes, "--metrics-bind-address=" + metrics, "--watch-namespaces=default"}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	mgr, err := manager.New(env.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager stopped with %v", err)
		}
	})

	select {
	case <-mgr.Elected():
	case <-time.After(30 * time.Second):
		t.Fatal("not elected leader within 30s")
	}
	for _, u := range []string{"http://" + probes + "/healthz", "http://" + probes + "/readyz"} {
		if err := waitOK(u, "ok"); err != nil {
			t.Fatal(err)
		}
	}
	// Metrics are HTTPS and refuse a caller without a token (the e2e TestOperatorMetricsSecure
	// scrapes them with one).
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed serving certificate
	var code int
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := hc.Get("https://" + metrics + "/metrics")
		if err != nil {
			continue
		}
		code = resp.StatusCode
		_ = resp.Body.Close()
		break
	}
	if code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Fatalf("anonymous GET /metrics: HTTP %d, want 401 or 403", code)
	}
}

// waitOK polls url until it answers 200 with a body containing want.
func waitOK(url, want string) error {
	var last string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get(url)
		if err != nil {
			last = err.Error()
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK && strings.Contains(string(body), want) {
			return nil
		}
		last = fmt.Sprintf("%d %.200q", resp.StatusCode, body)
	}
	return fmt.Errorf("%s never answered 200 with %q; last: %s", url, want, last)
}
