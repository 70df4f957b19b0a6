//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/internal/tlsplan"
	"github.com/etcd-steward/steward/test/e2e/framework"
)

// The most important etcd client, a kube-apiserver, reads --etcd-cafile, --etcd-certfile and
// --etcd-keyfile once, at start. Started on the application Secret's files before a CA
// rotation, it keeps creating and reading objects through the client Service through WidenTrust
// and SwapLeaves (members present the new CA cross-signed by the old one); the rotation then
// waits, saying what to do, instead of dropping the old CA. Restarted on the Secret's new files
// and approved, it keeps working through DropOldCA. "Working" is History.Lockouts: no failure but
// those etcd returns to a connected client while members restart (a proposal dropped at a
// handoff, a commit timed out with its peers connected), each followed by a success; the
// MEASURE lines report those.
func TestCARotationKubeAPIServer(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "kas", 3, "")
	proxy := framework.StartTCPProxy(t, clientServiceAddr(t, ns, "kas"))
	oldCA := caFingerprint(t, ns, "kas")
	oldFiles := appFiles(t, ns, "kas")
	kas := framework.StartKubeAPIServer(t, f.KubeAPIServer, t.TempDir(), "https://"+proxy.Addr, "/kas-e2e", oldFiles)
	load := startAPILoad(t, kas, "before")
	time.Sleep(5 * time.Second) // a steady state to compare latency with
	passes := watchPasses(t, ns, "kas")
	update(t, ns, "kas", func(ec *stewardv1.EtcdCluster) { ec.Spec.TLS.RotateCA = "kas1" })
	start := time.Now()

	var wait *stewardv1.DropOldCAStatus
	f.WaitFor(t, ns, "the rotation waiting for clients before DropOldCA", 10*time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, "kas")
		if err != nil || ec.Status.TLS == nil {
			return false, err
		}
		wait = ec.Status.TLS.DropOldCA
		return wait != nil, fmt.Errorf("pass %q", ec.Status.TLS.Rotation)
	})
	waited := time.Now()
	h := load.stop()
	logAPILoad(t, "CA rotation widen and swap, kube-apiserver on the old files", h, start)
	if failed := h.Lockouts(); len(failed) > 0 {
		t.Errorf("%d kube-apiserver requests failed through WidenTrust and SwapLeaves: %s", len(failed), firstOps(failed))
	}
	requireOldOnlyVerifies(t, proxy.Addr, oldFiles)
	if !strings.Contains(wait.Message, "kube-apiserver") || !strings.Contains(wait.Message, wait.Approval) || len(eventsWith(t, ns, "kas", "CARotationWaitingForClients")) == 0 {
		t.Errorf("the wait does not say what to do: %+v (events %v)", wait, eventsWith(t, ns, "kas", "CARotationWaitingForClients"))
	}
	// Status says so while it waits; a member that is slow to answer on a loaded machine turns the
	// reason to WaitingForHealth for a moment (CI saw it once), so it is waited for, not read once.
	f.WaitFor(t, ns, "a condition with reason WaitingForClientRestart", 3*time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, "kas")
		if err != nil {
			return false, err
		}
		found := slices.ContainsFunc(ec.Status.Conditions, func(c metav1.Condition) bool { return c.Reason == "WaitingForClientRestart" })
		return found, fmt.Errorf("conditions %+v", ec.Status.Conditions)
	})
	podsOn(t, ns, "kas", 3, "still trusting the old CA", func(p *corev1.Pod) bool {
		peer, client := tlsplan.ParsePlaneTrust(p.Annotations[stewardv1.AnnotationTrust])
		return slices.Contains(peer, oldCA) && slices.Contains(client, oldCA)
	})

	// The user's part: restart the kube-apiserver on the Secret's files, then approve.
	kas.Stop()
	newFiles := appFiles(t, ns, "kas")
	if string(newFiles.Cert) == string(oldFiles.Cert) {
		t.Fatal("the application Secret's certificate did not change in SwapLeaves")
	}
	kas = framework.StartKubeAPIServer(t, f.KubeAPIServer, t.TempDir(), "https://"+proxy.Addr, "/kas-e2e", newFiles)
	load = startAPILoad(t, kas, "after")
	time.Sleep(5 * time.Second)
	update(t, ns, "kas", func(ec *stewardv1.EtcdCluster) { ec.Spec.TLS.ApproveDropOldCA = wait.Approval })
	approved := time.Now()
	f.WaitFor(t, ns, "rotation kas1 finished", 8*time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, "kas")
		if err != nil || ec.Status.TLS == nil {
			return false, err
		}
		if ec.Status.TLS.RotateCA != "kas1" || ec.Status.TLS.Rotation != "" {
			return false, fmt.Errorf("rotateCA %q, pass %q", ec.Status.TLS.RotateCA, ec.Status.TLS.Rotation)
		}
		return settled(ns, "kas", 3)(ctx)
	})
	h = load.stop()
	logAPILoad(t, "CA rotation drop, kube-apiserver restarted on the new files", h, approved)
	if failed := h.Lockouts(); len(failed) > 0 {
		t.Errorf("%d kube-apiserver requests failed through DropOldCA: %s", len(failed), firstOps(failed))
	}
	var order []string
	for _, p := range passes.stop() {
		order = append(order, p.pass)
	}
	if !slices.Equal(order, []string{"WidenTrust", "SwapLeaves", "DropOldCA"}) {
		t.Errorf("passes %v, want WidenTrust, SwapLeaves, DropOldCA", order)
	}
	if caFingerprint(t, ns, "kas") == oldCA {
		t.Error("the CA did not change")
	}
	measure(t, "CA rotation with a kube-apiserver: rotateCA to waiting for clients", waited.Sub(start))
	measure(t, "CA rotation with a kube-apiserver: approval to done", time.Since(approved))
}

// appFiles are the application Secret's files, as a kube-apiserver is given them.
func appFiles(t *testing.T, ns, name string) framework.EtcdFiles {
	s := clientSecret(t, ns, name)
	return framework.EtcdFiles{CA: s.Data[pki.KeyCA], Cert: s.Data[pki.KeyCert], Key: s.Data[pki.KeyKey]}
}

// requireOldOnlyVerifies: with the old files, a handshake through the client Service verifies a
// member presenting a new-signed leaf, through the cross-signed CA after it. A few dials, so
// kube-proxy spreads them over the members.
func requireOldOnlyVerifies(t *testing.T, addr string, files framework.EtcdFiles) {
	t.Helper()
	cert, err := tls.X509KeyPair(files.Cert, files.Key)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(files.CA)
	old, err := pki.ParseCertsPEM(files.CA)
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatalf("a client on the old files refuses a member: %v", err)
		}
		chain := conn.ConnectionState().PeerCertificates
		_ = conn.Close()
		if len(chain) < 2 || chain[0].CheckSignatureFrom(old[0]) == nil {
			t.Errorf("a member presents %d certificates, the leaf signed by the old CA %v: want a new-signed leaf and the cross-signed CA",
				len(chain), chain[0].CheckSignatureFrom(old[0]) == nil)
		}
	}
}

// apiLoad creates a ConfigMap and reads it back every 100 ms through a kube-apiserver.
type apiLoad struct {
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	history framework.History
}

func startAPILoad(t *testing.T, kas *framework.KubeAPIServer, label string) *apiLoad {
	t.Helper()
	cs, err := kas.Clientset(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &apiLoad{cancel: cancel}
	ensureNamespace(t, cs)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for seq := 0; ctx.Err() == nil; seq++ {
			name := fmt.Sprintf("%s-%06d", label, seq)
			created := l.do(ctx, framework.OpPut, name, func(ctx context.Context) error {
				_, err := cs.CoreV1().ConfigMaps("e2e").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name},
					Data: map[string]string{"seq": fmt.Sprint(seq)}}, metav1.CreateOptions{})
				return err
			})
			// A failed create's read-back finds nothing, and printed alone it read as a Get that
			// missed an object just created (the create's own failure is counted).
			if created {
				l.do(ctx, framework.OpGet, name, func(ctx context.Context) error {
					_, err := cs.CoreV1().ConfigMaps("e2e").Get(ctx, name, metav1.GetOptions{})
					return err
				})
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { l.stop() })
	return l
}

func (l *apiLoad) do(ctx context.Context, kind framework.OpKind, key string, call func(context.Context) error) bool {
	op := framework.Op{Kind: kind, Key: key, Start: time.Now()}
	err := call(context.WithoutCancel(ctx)) // a request in flight when the load stops still counts
	op.End = time.Now()
	if err != nil {
		op.Err = err.Error()
	}
	l.mu.Lock()
	l.history = append(l.history, op)
	l.mu.Unlock()
	return err == nil
}

func (l *apiLoad) stop() framework.History {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.history)
}

// ensureNamespace creates the load's namespace once the kube-apiserver accepts writes.
func ensureNamespace(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e"}}, metav1.CreateOptions{})
		cancel()
		if err == nil || apierrors.IsAlreadyExists(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("creating the load's namespace: %v", err)
		}
		time.Sleep(time.Second)
	}
}

// logAPILoad logs the kube-apiserver requests from since on as MEASURE figures.
func logAPILoad(t *testing.T, label string, h framework.History, since time.Time) {
	t.Helper()
	before, during := split(h, since)
	if len(before) > 0 {
		t.Logf("MEASURE %s, steady: %s", label, before.Summary())
	}
	t.Logf("MEASURE %s: %s", label, during.Summary())
}

// firstOps names up to five failed requests, each with its time and error.
func firstOps(ops []framework.Op) string {
	var b strings.Builder
	for i, o := range ops[:min(len(ops), 5)] {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s %s at %s after %s: %s", o.Kind, o.Key, o.Start.Format("15:04:05.000"), o.Latency().Round(time.Millisecond), o.Err)
	}
	return b.String()
}
