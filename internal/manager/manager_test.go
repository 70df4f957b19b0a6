package manager_test

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
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
// kube-apiserver, and checks that it wins leader election and answers its probes and metrics, and
// that the eviction webhook gets its certificate (checkWebhookCertificate).
func TestManagerServesHealth(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	installWebhookObjects(t, env)
	m := startManager(t, env)

	if err := waitOK("http://"+m.probes+"/healthz", "ok"); err != nil {
		t.Fatal(err)
	}
	// Not Ready while the eviction webhook cannot serve (no certificate projected yet): the
	// Service would route the API server's calls to a replica that does not answer them.
	checkNotReady(t, "http://"+m.probes+"/readyz", "eviction-webhook")
	// Metrics are HTTPS and refuse a caller without a token (the e2e TestOperatorMetricsSecure
	// scrapes them with one).
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed serving certificate
	var code int
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := hc.Get("https://" + m.metrics + "/metrics")
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
	checkCacheStripsManagedFields(t, m.mgr)
	checkWebhookCertificate(t, env, m.certDir, m.webhookPort)
	if err := waitOK("http://"+m.probes+"/readyz", "ok"); err != nil {
		t.Fatalf("the webhook serves, yet: %v", err)
	}
}

// TestManagerReadyWhenWebhookCannotServe: the install's Secret for the webhook's certificate is
// missing, so the certificate rotator gives up and the webhook will never serve. The operator
// still turns Ready (evictions go to the PodDisruptionBudget alone, as logged) rather than being
// kept out of its Service, and off its clusters' duties, for good.
func TestManagerReadyWhenWebhookCannotServe(t *testing.T) {
	// Controller names are unique within a process, and TestManagerServesHealth started the same
	// controllers: this test runs in a process of its own.
	if os.Getenv("STEWARD_TEST_OWN_PROCESS") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "STEWARD_TEST_OWN_PROCESS=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		return
	}
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	installWebhookConfiguration(t, env) // and no Secret
	m := startManager(t, env)
	if err := waitOK("http://"+m.probes+"/readyz", "ok"); err != nil {
		t.Fatalf("the rotator has no Secret to write, yet: %v", err)
	}
}

// startedManager is a manager started by startManager, and where it serves.
type startedManager struct {
	mgr                                   ctrl.Manager
	probes, metrics, certDir, webhookPort string
}

// startManager starts the manager with cmd/steward's flags, watching namespace default, and
// waits for it to be elected leader; it is stopped when the test ends.
func startManager(t *testing.T, env *testenv.Env) startedManager {
	t.Helper()
	var o manager.Options
	fs := flag.NewFlagSet("steward", flag.ContinueOnError)
	o.BindFlags(fs)
	m := startedManager{probes: freeAddr(t), metrics: freeAddr(t), certDir: t.TempDir()}
	_, m.webhookPort, _ = net.SplitHostPort(freeAddr(t))
	args := []string{"--leader-elect", "--leader-election-namespace=default",
		"--health-probe-bind-address=" + m.probes, "--metrics-bind-address=" + m.metrics, "--watch-namespaces=default",
		"--webhook-cert-dir=" + m.certDir, "--webhook-port=" + m.webhookPort}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	mgr, err := manager.New(env.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	m.mgr = mgr
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
	return m
}

// checkNotReady: url answers an error (controller-runtime's is 500) naming the failing check.
func checkNotReady(t *testing.T, url, check string) {
	t.Helper()
	resp, err := http.Get(url + "?verbose")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusOK || !strings.Contains(string(body), "[-]"+check) {
		t.Fatalf("%s: HTTP %d %.300q, want an error with %s failing", url, resp.StatusCode, body, check)
	}
}

// checkCacheStripsManagedFields: the informers keep no managedFields (a Pod's run to several times
// the rest of its metadata, and the operator reads none of them), so memory grows with objects, not
// with the field managers' history.
func checkCacheStripsManagedFields(t *testing.T, mgr ctrl.Manager) {
	t.Helper()
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cached", Namespace: "default",
		Labels: map[string]string{stewardv1.LabelCluster: "c"}}, StringData: map[string]string{"k": "v"}}
	if err := mgr.GetClient().Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	var direct corev1.Secret
	if err := mgr.GetAPIReader().Get(ctx, client.ObjectKeyFromObject(s), &direct); err != nil {
		t.Fatal(err)
	}
	if len(direct.ManagedFields) == 0 {
		t.Fatal("the API server recorded no managedFields: nothing to strip, the check would prove nothing")
	}
	var cached corev1.Secret
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err := mgr.GetClient().Get(ctx, client.ObjectKeyFromObject(s), &cached)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache never saw the Secret: %v", err)
		}
	}
	if len(cached.ManagedFields) != 0 {
		t.Errorf("the cache keeps %d managedFields entries", len(cached.ManagedFields))
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
