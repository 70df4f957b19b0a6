package controller_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clientv3 "go.etcd.io/etcd/client/v3"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/etcdtest"
	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/internal/resources"
)

// A TLS source is adopted with its CA. Against a real etcd serving mutual TLS on its client port
// (its peers plaintext, as many sources run): without the CA's Secret the preflight stops at
// SourceCA and Steward creates no CA of its own (its certificates would be refused by the
// source); once the Secret exists, the cluster's CA Secret is the source's CA, the operator's
// client certificate issued from it is accepted by the source (Reachable passes on a live read),
// and the plaintext peers are refused by PeerScheme with the way out. Nothing of the source changes.
func TestAdoptionTakesTheSourceCA(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ca, url := startTLSSource(t, ns)
	app := sourceTLSClient(t, ca, url) // an application of the source, with a certificate from its CA
	before, clusterID := members(t, app)

	ec := joinCluster(ns, []string{url})
	ec.Spec.TLS = nil // on, the default
	ec.Spec.Bootstrap.Join.CASecretName = "source-ca"
	if err := env.Client.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	firstFailure := func() (stewardv1.AdoptionCheck, []stewardv1.AdoptionCheck, error) { return refusedAt(ctx, ec) }
	eventually(t, "refused at SourceCA while the Secret is missing", func() error {
		c, checks, err := firstFailure()
		if err != nil {
			return err
		}
		if c.Name != "SourceCA" || len(checks) != 1 || !strings.Contains(c.Message, `Secret source-ca not found`) ||
			!strings.Contains(c.Message, "kubectl create secret tls source-ca") {
			return fmt.Errorf("checks %+v", checks)
		}
		return nil
	})
	var own corev1.Secret
	caKey := client.ObjectKey{Namespace: ns, Name: resources.CASecretName(ec.Name)}
	if err := env.Client.Get(ctx, caKey, &own); !apierrors.IsNotFound(err) {
		t.Fatalf("the cluster's CA Secret before the source's CA was given: %v (a CA of Steward's own locks it out of the source)", err)
	}

	if err := env.Client.Create(ctx, sourceCASecret(t, ns, ca)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the source's CA taken, the source read through it, its plaintext peers refused", func() error {
		c, checks, err := firstFailure()
		if err != nil {
			return err
		}
		if c.Name != "PeerScheme" || !strings.Contains(c.Message, "is plaintext while Steward's members would use TLS") {
			return fmt.Errorf("first failure %+v", c)
		}
		if checks[0].Name != "SourceCA" || !checks[0].Passed || !strings.Contains(checks[0].Message, ca.Cert.Subject.String()) {
			return fmt.Errorf("SourceCA %+v", checks[0])
		}
		if r := checks[2]; r.Name != "Reachable" || !r.Passed {
			return fmt.Errorf("Reachable %+v", r)
		}
		return nil
	})
	if err := env.Client.Get(ctx, caKey, &own); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(own.Data[pki.KeyCA], ca.CertPEM()) {
		t.Fatalf("the cluster's CA Secret holds another CA than the source's")
	}
	time.Sleep(3 * time.Second)
	var ms stewardv1.EtcdMemberList
	if err := env.Client.List(ctx, &ms, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	after, id := members(t, app)
	if len(ms.Items) != 0 || !slices.Equal(after, before) || id != clusterID {
		t.Fatalf("refused, yet %d EtcdMembers exist and the member list is %v (cluster %x), was %v (%x)",
			len(ms.Items), after, id, before, clusterID)
	}
}

// startTLSSource runs a one-member etcd serving mutual TLS on its client port (plaintext peers)
// with a certificate of a CA made here; a failed test logs the namespace's events and Secrets.
func startTLSSource(t *testing.T, ns string) (*pki.CA, string) {
	t.Helper()
	bin, err := etcdtest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca, err := pki.NewCA("source", ns, now.Add(-time.Hour), 365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.IssueServer(pki.MemberNames{Cluster: "source", Namespace: ns, Member: "source-0"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	m, err := server.Material(ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"server.crt": m.Cert, "server.key": m.Key, "ca.crt": m.CA} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	url := etcdtest.StartTLS(t, bin, dir)
	t.Cleanup(func() { // what the operator did, for a failed run
		if !t.Failed() {
			return
		}
		var evs corev1.EventList
		_ = env.Client.List(context.Background(), &evs, client.InNamespace(ns))
		for _, e := range evs.Items {
			t.Logf("event %s %s: %s", e.Reason, e.Type, e.Message)
		}
		var ss corev1.SecretList
		_ = env.Client.List(context.Background(), &ss, client.InNamespace(ns))
		for _, s := range ss.Items {
			t.Logf("secret %s", s.Name)
		}
	})

	return ca, url
}

func sourceCASecret(t *testing.T, ns string, ca *pki.CA) *corev1.Secret {
	t.Helper()
	key, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "source-ca"},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: ca.CertPEM(), corev1.TLSPrivateKeyKey: key}}
}

// A source with TLS clients and plaintext peers is adopted with spec.tls.peer.enabled false: the
// preflight passes on live reads through the source's CA, and Steward's first member joins as a
// learner on a plaintext peer URL. (It never runs here: no kubelet.) An abort then gives the
// source back as it was.
func TestAdoptionOfTLSClientsWithPlaintextPeers(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ca, url := startTLSSource(t, ns)
	app := sourceTLSClient(t, ca, url)
	before, clusterID := members(t, app)
	if err := env.Client.Create(ctx, sourceCASecret(t, ns, ca)); err != nil {
		t.Fatal(err)
	}
	ec := joinCluster(ns, []string{url})
	ec.Spec.TLS = &stewardv1.TLSSpec{Peer: stewardv1.TLSPlane{Enabled: new(false)}}
	ec.Spec.Bootstrap.Join.CASecretName = "source-ca"
	if err := env.Client.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	peer := fmt.Sprintf("http://adopted-0.adopted.%s.svc:2380", ns)
	eventually(t, "every check passed, Steward's first member a learner on a plaintext peer URL", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
			return err
		}
		a := ec.Status.Adoption
		if a == nil || a.Phase != stewardv1.AdoptionHandingOver || len(a.Checks) != 11 ||
			slices.ContainsFunc(a.Checks, func(c stewardv1.AdoptionCheck) bool { return !c.Passed }) {
			return fmt.Errorf("adoption %+v", a)
		}
		if now, _ := members(t, app); !slices.Equal(now, sortedCopy(append(slices.Clone(before), peer+":learner"))) {
			return fmt.Errorf("member list %v", now)
		}
		return nil
	})
	patch := client.MergeFrom(ec.DeepCopy())
	ec.Spec.Bootstrap.Join.Abort = true
	if err := env.Client.Patch(ctx, ec, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the abort gives the source back", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
			return err
		}
		releasePVCs(t, ns)
		now, id := members(t, app)
		if !slices.Equal(now, before) || id != clusterID || ec.Status.Adoption.Phase != stewardv1.AdoptionAborted {
			return fmt.Errorf("member list %v (cluster %x), phase %s", now, id, ec.Status.Adoption.Phase)
		}
		return nil
	})
}

func sourceTLSClient(t *testing.T, ca *pki.CA, url string) *clientv3.Client {
	t.Helper()
	return rawClient(t, ca, url, "app")
}

// A CA Secret that is not the source's (a source running --auto-tls has certificates etcd made
// itself, which no CA signs): the handshake fails on the operator's side, the member list only
// times out, and the preflight stops at Reachable saying the certificates do not chain to the CA
// given, with etcd's handshake error. Against a real etcd; nothing of it changes.
func TestAdoptionOfASourceWithAnotherCA(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ca, url := startTLSSource(t, ns)
	app := sourceTLSClient(t, ca, url)
	before, _ := members(t, app)
	other, err := pki.NewCA("other", ns, time.Now().Add(-time.Hour), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, sourceCASecret(t, ns, other)); err != nil {
		t.Fatal(err)
	}
	ec := joinCluster(ns, []string{url})
	ec.Spec.TLS = nil
	ec.Spec.Bootstrap.Join.CASecretName = "source-ca"
	if err := env.Client.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	eventually(t, "refused at Reachable: the source's certificate is not of the CA given", func() error {
		c, checks, err := refusedAt(ctx, ec)
		if err != nil {
			return err
		}
		if c.Name != "Reachable" || !strings.Contains(c.Message, "does not chain to the CA in Secret source-ca") ||
			!strings.Contains(c.Message, "x509: certificate signed by unknown authority") {
			return fmt.Errorf("checks %+v", checks)
		}
		return nil
	})
	if after, _ := members(t, app); !slices.Equal(after, before) {
		t.Fatalf("member list %v, was %v", after, before)
	}
}

// refusedAt reads ec and returns the preflight's first failed check and every check, or why the
// adoption is not Refused yet.
func refusedAt(ctx context.Context, ec *stewardv1.EtcdCluster) (stewardv1.AdoptionCheck, []stewardv1.AdoptionCheck, error) {
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
		return stewardv1.AdoptionCheck{}, nil, err
	}
	a := ec.Status.Adoption
	if a == nil || a.Phase != stewardv1.AdoptionRefused {
		return stewardv1.AdoptionCheck{}, nil, fmt.Errorf("adoption %+v", a)
	}
	i := slices.IndexFunc(a.Checks, func(c stewardv1.AdoptionCheck) bool { return !c.Passed })
	if i < 0 {
		return stewardv1.AdoptionCheck{}, nil, fmt.Errorf("refused with every check passed: %+v", a.Checks)
	}
	return a.Checks[i], a.Checks, nil
}
