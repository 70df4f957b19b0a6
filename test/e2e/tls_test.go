//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/internal/resources"
	"github.com/etcd-steward/steward/test/e2e/framework"
)

// A default cluster runs mutual TLS: plaintext clients and clients without a certificate are
// refused; the application client Secret works. A cluster created with TLS off runs plaintext.
func TestTLSDefault(t *testing.T) {
	t.Parallel()
	t.Run("mutual", func(t *testing.T) {
		t.Parallel()
		ns := settledCluster(t, "sec", 3, "")
		svc := clientServiceAddr(t, ns, "sec")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()

		plain, err := framework.NewEtcdClient([]string{"http://" + svc}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = plain.Close() }()
		if _, err := getWithin(ctx, plain, 3*time.Second); err == nil {
			t.Error("a plaintext client was served by a TLS cluster")
		}

		secret := clientSecret(t, ns, "sec")
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(secret.Data[pki.KeyCA])
		anon, err := framework.NewEtcdClient([]string{"https://" + svc},
			&tls.Config{RootCAs: roots, ServerName: resources.ClientServiceName("sec") + "." + ns + ".svc", MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = anon.Close() }()
		if _, err := getWithin(ctx, anon, 3*time.Second); err == nil {
			t.Error("a client without a certificate was served")
		}

		if _, err := getWithin(ctx, clientFor(t, ns, "sec"), 5*time.Second); err != nil {
			t.Errorf("the application client Secret does not work: %v", err)
		}
		checkPeerPort(t, ns, "sec", secret)
		ec, err := get(ctx, ns, "sec")
		if err != nil {
			t.Fatal(err)
		}
		if !meta.IsStatusConditionTrue(ec.Status.Conditions, "TLSMaterialValid") || ec.Status.TLS == nil {
			t.Fatalf("TLS status: %s, %+v", condition(ec, "TLSMaterialValid"), ec.Status.TLS)
		}
		for _, m := range memberNames("sec", 3) {
			if c := certStatus(ec, m+"/server"); c == nil || !c.Served {
				t.Errorf("%s/server not shown as served: %+v", m, c)
			}
		}
	})
	t.Run("plaintext", func(t *testing.T) {
		t.Parallel()
		ns := settledCluster(t, "plain", 1, "", func(ec *stewardv1.EtcdCluster) {
			ec.Spec.TLS = &stewardv1.TLSSpec{Enabled: ptr.To(false)}
		})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := getWithin(ctx, clientFor(t, ns, "plain"), 5*time.Second); err != nil {
			t.Errorf("plaintext cluster: %v", err)
		}
		var s corev1.Secret
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.CASecretName("plain")}, &s); err == nil {
			t.Error("a plaintext cluster got a CA Secret")
		}
	})
}

// Leaves with a four-minute lifetime are renewed at two thirds of it: every member's server and
// peer leaf and the application client's are replaced, the members serve the new ones, and no
// Pod restarts and no request fails, with clients reloading the Secret. (The kubelet refreshes
// Secret volumes within about a minute, so a renewal cycle must be well above that.)
func TestTLSRenewal(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "renew", 3, "", func(ec *stewardv1.EtcdCluster) {
		ec.Spec.TLS = &stewardv1.TLSSpec{CertificateDuration: &metav1.Duration{Duration: 4 * time.Minute}}
	})
	ec, err := get(context.Background(), ns, "renew")
	if err != nil {
		t.Fatal(err)
	}
	first := map[string]time.Time{}
	for _, c := range ec.Status.TLS.Certificates {
		first[c.Name] = c.NotAfter.Time
	}
	before := uids(t, ns, "renew")
	ctls := clientTLSFor(t, ns, "renew")
	traffic := framework.StartTraffic(clientFor(t, ns, "renew"), framework.TrafficConfig{Prefix: "/renew/"})
	mon := monitor(t, ns, "renew", func() []string { return memberNames("renew", 3) })
	start := time.Now()

	names := []string{"client"}
	for _, m := range memberNames("renew", 3) {
		names = append(names, m+"/server", m+"/peer")
	}
	f.WaitFor(t, ns, "every certificate renewed and served", 6*time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, "renew")
		if err != nil || ec.Status.TLS == nil {
			return false, err
		}
		for _, n := range names {
			c := certStatus(ec, n)
			switch {
			case c == nil:
				return false, fmt.Errorf("%s not in status", n)
			case !c.NotAfter.After(first[n]):
				return false, fmt.Errorf("%s not renewed yet (expires %s)", n, c.NotAfter.Format(time.RFC3339))
			case n != "client" && !c.Served:
				return false, fmt.Errorf("%s renewed, not served yet", n)
			}
		}
		return true, nil
	})
	measure(t, "TLS renewal: every leaf renewed and served, from the start of traffic", time.Since(start))
	waitSettled(t, ns, "renew", 3, 2*time.Minute)
	time.Sleep(3 * time.Second) // traffic on the renewed material
	h := traffic.Stop()
	assertMaxUnavailable(t, mon, 0)
	assertPodsUntouched(t, ns, "renew", before, "renewal must not restart members")
	if failed := h.Failed(); len(failed) > 0 {
		t.Errorf("%d of %d requests failed during renewal, first %+v", len(failed), len(h), failed[0])
	}
	if ctls.Reloads() == 0 {
		t.Error("the application client Secret was never renewed")
	}
	t.Logf("MEASURE TLS renewal traffic: %s; client Secret reloads %d", h.Summary(), ctls.Reloads())
}

// A CA rotation on demand runs its three passes in order on every member, with never more than
// one member unavailable and no acknowledged write lost, while clients reload the Secret. One
// cluster runs with etcd auth on from its creation (issue 29): Steward's identities, the shared
// client and a tenant's certificate all move to the new CA without losing their users.
func TestCARotation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		medium stewardv1.StorageMedium
		// killAt: the operator is killed when status first shows this pass; the rotation must
		// carry on from live state (Pod trust annotations, served leaves, the CA Secret).
		killAt string
		auth   bool
		// approve: the test approves DropOldCA once its clients reloaded the Secrets; otherwise
		// the rotation waits out spec.tls.dropOldCAAfter (90 s), the path of a user who never looks.
		approve bool
	}{{"", "", true, true}, {stewardv1.StorageMediumMemory, "", false, false}, {"", "SwapLeaves", false, true}} {
		label := medium2(c.medium)
		if c.killAt != "" {
			label += "-operator-killed-in-" + c.killAt
		}
		if c.auth {
			label += "-auth"
		}
		medium, auth, approve := c.medium, c.auth, c.approve
		t.Run(label, func(t *testing.T) {
			t.Parallel()
			// Every client here reloads the Secret: the shortest wait before dropping the old CA.
			ns := settledCluster(t, "rot", 3, medium, shortDropGrace, func(ec *stewardv1.EtcdCluster) {
				if auth {
					ec.Spec.Auth = &stewardv1.AuthSpec{Enabled: true,
						Roles: []stewardv1.AuthRole{{Name: "tenant-a", Permissions: []stewardv1.AuthPermission{{Prefix: "/a/", Access: stewardv1.AccessReadWrite}}}},
						Users: []stewardv1.AuthUser{{Name: "app-a", Roles: []string{"tenant-a"}}}}
				}
			})
			var tenant *clientv3.Client
			reloading := []*framework.ClientTLS{clientTLSFor(t, ns, "rot")}
			if auth {
				waitAuthOf(t, ns, "rot", "auth on with app-a ready", 3*time.Minute, func(a *stewardv1.AuthStatus) bool {
					return a.Phase == "On" && len(a.Users) == 1 && a.Users[0].State == "Ready"
				})
				tenantTLS := f.ClientTLS(t, ns, "rot-user-app-a")
				reloading = append(reloading, tenantTLS)
				tenant = clientWith(t, ns, "rot", tenantTLS)
				tenantWrites(t, tenant, "before")
			}
			oldCA := caFingerprint(t, ns, "rot")
			data := putData(t, clientFor(t, ns, "rot"), "/rotation/", 20)
			w := watchRollFor(t, ns, "rot", 3, medium)
			passes := watchPasses(t, ns, "rot")
			w.change(func(ec *stewardv1.EtcdCluster) { ec.Spec.TLS.RotateCA = "r1" })
			if c.killAt != "" {
				f.WaitFor(t, ns, "pass "+c.killAt, 4*time.Minute, func(ctx context.Context) (bool, error) {
					ec, err := get(ctx, ns, "rot")
					if err != nil || ec.Status.TLS == nil {
						return false, err
					}
					return ec.Status.TLS.Rotation == c.killAt, fmt.Errorf("pass %q", ec.Status.TLS.Rotation)
				})
				killOperator(t)
			}
			// Three passes of member restarts, and without the approval a 90 s grace: 5m04s on a
			// loaded run.
			approved := false
			f.WaitFor(t, ns, "rotation r1 finished", 12*time.Minute, func(ctx context.Context) (bool, error) {
				if approve && !approved {
					var err error
					if approved, err = approveDropOnceReloaded(ctx, ns, "rot", reloading...); err != nil {
						return false, err
					}
				}
				ec, err := get(ctx, ns, "rot")
				if err != nil || ec.Status.TLS == nil {
					return false, err
				}
				if ec.Status.TLS.RotateCA != "r1" || ec.Status.TLS.Rotation != "" {
					return false, fmt.Errorf("rotateCA %q, pass %q", ec.Status.TLS.RotateCA, ec.Status.TLS.Rotation)
				}
				return settled(ns, "rot", 3)(ctx)
			})
			w.finish("CA rotation "+label, 1)
			if approve && !approved {
				t.Error("the rotation finished without asking for the approval to drop the old CA")
			}
			seen := passes.stop()
			var order []string
			for _, p := range seen {
				order = append(order, p.pass)
			}
			if !slices.Equal(order, []string{"WidenTrust", "SwapLeaves", "DropOldCA"}) {
				t.Errorf("passes %v, want WidenTrust, SwapLeaves, DropOldCA", order)
			}
			for i, p := range seen {
				end := time.Now()
				if i+1 < len(seen) {
					end = seen[i+1].at
				}
				measure(t, fmt.Sprintf("CA rotation %s pass %s", label, p.pass), end.Sub(p.at))
			}
			newCA := caFingerprint(t, ns, "rot")
			if newCA == oldCA {
				t.Fatal("the CA did not change")
			}
			podsOn(t, ns, "rot", 3, "trusting only the new CA", func(p *corev1.Pod) bool {
				return p.Annotations[stewardv1.AnnotationTrust] == newCA
			})
			reason := "DeletePod"
			if medium == stewardv1.StorageMediumMemory {
				reason = "RemoveMember"
			}
			// Each member restarts once per restart pass, except that a member whose Pod is being
			// rebuilt when a pass begins starts straight on that pass's trust (safe: it is what the
			// restart would give it).
			steps := rolledOrder(t, ns, "rot", reason)
			for _, m := range memberNames("rot", 3) {
				if !slices.Contains(steps, m) {
					t.Errorf("%s was never restarted: %v", m, steps)
				}
			}
			if len(steps) > 6 {
				t.Errorf("%d %s steps (%v), at most 6 expected", len(steps), reason, steps)
			}
			t.Logf("MEASURE CA rotation %s: %d %s steps", label, len(steps), reason)
			checkData(t, clientFor(t, ns, "rot"), "/rotation/", data)
			if auth {
				// The tenant's client reloaded its Secret, now from the new CA: still app-a.
				tenantWrites(t, tenant, "after")
			}
		})
	}
}

// Deleting the CA Secret of a running cluster fails closed: the condition names the Secret and no
// member is touched (a new CA would lock the members out).
func TestTLSCASecretDeleted(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "lost", 3, "")
	before := uids(t, ns, "lost")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: resources.CASecretName("lost")}}
	if err := f.Client.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	f.WaitFor(t, ns, "TLSMaterialValid=False naming the Secret", time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, "lost")
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(ec.Status.Conditions, "TLSMaterialValid")
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "lost-ca") {
			return false, fmt.Errorf("%s", condition(ec, "TLSMaterialValid"))
		}
		return true, nil
	})
	assertPodsUntouched(t, ns, "lost", before, "a lost CA must not rebuild anything")
}

func medium2(m stewardv1.StorageMedium) string {
	if m == "" {
		return "PVC"
	}
	return string(m)
}

// approveDropOnceReloaded does what a user whose applications all reload their Secrets does
// during a CA rotation: once status asks for the approval to drop the old CA and every one of
// those clients holds its Secret's current material (the new-signed certificate, the new CA in
// the bundle), it approves, rather than letting spec.tls.dropOldCAAfter run out. It reports
// whether the approval is in the spec.
func approveDropOnceReloaded(ctx context.Context, ns, name string, clients ...*framework.ClientTLS) (bool, error) {
	ec, err := get(ctx, ns, name)
	if err != nil || ec.Status.TLS == nil || ec.Status.TLS.DropOldCA == nil {
		return false, err
	}
	approval := ec.Status.TLS.DropOldCA.Approval
	if ec.Spec.TLS.ApproveDropOldCA == approval {
		return true, nil
	}
	for _, c := range clients {
		if ok, err := c.Current(ctx); !ok {
			return false, err
		}
	}
	patch := fmt.Sprintf(`{"spec":{"tls":{"approveDropOldCA":%q}}}`, approval)
	if err := f.MergePatch(ctx, &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, patch); err != nil {
		return false, err
	}
	return true, nil
}

// shortDropGrace: DropOldCA waits only the 90 s applications that reload need.
func shortDropGrace(ec *stewardv1.EtcdCluster) {
	if ec.Spec.TLS == nil {
		ec.Spec.TLS = &stewardv1.TLSSpec{}
	}
	ec.Spec.TLS.DropOldCAAfter = &metav1.Duration{Duration: 90 * time.Second}
}

func clientServiceAddr(t *testing.T, ns, name string) string {
	t.Helper()
	var svc corev1.Service
	if err := f.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: resources.ClientServiceName(name)}, &svc); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s:%d", svc.Spec.ClusterIP, resources.ClientPort)
}

func clientSecret(t *testing.T, ns, name string) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	if err := f.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: resources.ClientTLSSecretName(name)}, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

func caFingerprint(t *testing.T, ns, name string) string {
	t.Helper()
	return pki.Fingerprint(secretCert(t, ns, resources.CASecretName(name), pki.KeyCA))
}

func certStatus(ec *stewardv1.EtcdCluster, name string) *stewardv1.CertificateStatus {
	for i := range ec.Status.TLS.Certificates {
		if ec.Status.TLS.Certificates[i].Name == name {
			return &ec.Status.TLS.Certificates[i]
		}
	}
	return nil
}

// getWithin reads one key with its own deadline.
func getWithin(ctx context.Context, c *clientv3.Client, d time.Duration) (*clientv3.GetResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return c.Get(ctx, "tls-probe")
}

type passSeen struct {
	pass string
	at   time.Time
}

type passWatch struct {
	mu    sync.Mutex
	seen  []passSeen
	done  chan struct{}
	ended chan struct{}
}

// watchPasses records each distinct CA rotation pass status shows, with when it appeared.
func watchPasses(t *testing.T, ns, name string) *passWatch {
	w := &passWatch{done: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		defer close(w.ended)
		for {
			select {
			case <-w.done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			ec, err := get(context.Background(), ns, name)
			if err != nil || ec.Status.TLS == nil || ec.Status.TLS.Rotation == "" {
				continue
			}
			w.mu.Lock()
			if n := len(w.seen); n == 0 || w.seen[n-1].pass != ec.Status.TLS.Rotation {
				w.seen = append(w.seen, passSeen{ec.Status.TLS.Rotation, time.Now()})
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

func (w *passWatch) stop() []passSeen {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
	<-w.ended
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen)
}

func secretCert(t *testing.T, ns, name, key string) *x509.Certificate {
	t.Helper()
	var s corev1.Secret
	if err := f.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		t.Fatal(err)
	}
	certs, err := pki.ParseCertsPEM(s.Data[key])
	if err != nil {
		t.Fatalf("Secret %s key %s: %v", name, key, err)
	}
	return certs[0]
}

// checkPeerPort: the peer port admits a member's peer certificate but refuses the application's
// client certificate, although one CA signed both.
func checkPeerPort(t *testing.T, ns, name string, app *corev1.Secret) {
	t.Helper()
	member := resources.MemberName(name, 0)
	var ms corev1.Secret
	if err := f.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: resources.MemberTLSSecretName(member)}, &ms); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(memberPods(t, ns, name)[member].Status.PodIP, "2380")
	dial := func(certPEM, keyPEM []byte) error {
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
			&tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}) //nolint:gosec // testing the server's check
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close() }()
		// TLS 1.3: the server judges the client certificate after the client's side of the
		// handshake is done, and says so in an alert on the first read.
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			return nil // admitted: the peer server waits for a request
		}
		return err
	}
	if err := dial(ms.Data[resources.KeyPeerCert], ms.Data[resources.KeyPeerKey]); err != nil {
		t.Errorf("a member's peer certificate was refused on the peer port: %v", err)
	}
	if err := dial(app.Data[pki.KeyCert], app.Data[pki.KeyKey]); err == nil {
		t.Error("the application client certificate was admitted on the peer port")
	} else {
		t.Logf("application certificate on the peer port: %v", err)
	}
}

// tenantWrites: a tenant confined to /a/ writes and reads its prefix and is refused outside it.
func tenantWrites(t *testing.T, tenant *clientv3.Client, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := tenant.Put(ctx, "/a/"+key, key); err != nil {
		t.Errorf("the tenant writing its prefix (%s): %v", key, err)
	}
	if got, err := tenant.Get(ctx, "/a/"+key); err != nil || len(got.Kvs) != 1 {
		t.Errorf("the tenant reading its prefix (%s): %v %v", key, got, err)
	}
	if _, err := tenant.Get(ctx, "/rotation/", clientv3.WithPrefix()); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("the tenant reading outside its prefix (%s): %v, want permission denied", key, err)
	}
}
