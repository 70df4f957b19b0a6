package controller_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/internal/resources"
	"github.com/etcd-steward/steward/internal/tlsplan"
)

// userPlane is one of the user's Secrets: a leaf from its own CA, as a user or cert-manager would
// make it: one certificate for every member of cluster in ns.
type userPlane struct {
	ca   *pki.CA
	leaf *pki.Leaf
}

func newUserPlane(t *testing.T, cluster, ns string, u pki.Usage) userPlane {
	t.Helper()
	now := time.Now()
	ca, err := pki.NewCA(cluster, ns, now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dns := []string{"*." + resources.PeerServiceName(cluster) + "." + ns + ".svc"}
	if u == pki.Server {
		dns = append(dns, resources.ClientServiceName(cluster)+"."+ns+".svc")
	}
	leaf, err := ca.Issue("user-"+strings.ToLower(string(u)), u, dns, now, 12*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return userPlane{ca: ca, leaf: leaf}
}

// secret is the plane as a kubernetes.io/tls Secret with ca.crt.
func (p userPlane) secret(t *testing.T, ns, name string) *corev1.Secret {
	t.Helper()
	m, err := p.leaf.Material(p.ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{pki.KeyCert: m.Cert, pki.KeyKey: m.Key, pki.KeyCA: m.CA}}
}

func userCluster(ns, name, peerSecret, clientSecret string) *stewardv1.EtcdCluster {
	return &stewardv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: stewardv1.EtcdClusterSpec{Replicas: ptr.To[int32](3), MemberTemplate: stewardv1.MemberTemplate{Version: "3.6.16"},
			TLS: &stewardv1.TLSSpec{
				Peer:   stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret, SecretName: peerSecret},
				Client: stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret, SecretName: clientSecret},
			}},
	}
}

// waitMaterialInvalid waits for TLSMaterialValid=False with a message naming every word.
func waitMaterialInvalid(t *testing.T, ec *stewardv1.EtcdCluster, words ...string) *metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	eventually(t, "TLSMaterialValid=False naming "+strings.Join(words, ", "), func() error {
		var cur stewardv1.EtcdCluster
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(ec), &cur); err != nil {
			return err
		}
		c = meta.FindStatusCondition(cur.Status.Conditions, "TLSMaterialValid")
		if c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("condition %+v", c)
		}
		for _, w := range words {
			if !strings.Contains(c.Message, w) {
				return fmt.Errorf("message %q does not name %q", c.Message, w)
			}
		}
		return nil
	})
	return c
}

func requireNoPods(t *testing.T, ns, why string) {
	t.Helper()
	var pods corev1.PodList
	if err := env.Client.List(context.Background(), &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) > 0 {
		t.Fatalf("%d Pods (first %s) %s", len(pods.Items), pods.Items[0].Name, why)
	}
}

func fingerprints(t *testing.T, pemData []byte) []string {
	t.Helper()
	certs, err := pki.ParseCertsPEM(pemData)
	if err != nil {
		t.Fatal(err)
	}
	return pki.Fingerprints(certs)
}

// A cluster whose certificates come from the user's Secrets holds everything while a Secret is
// missing, saying which; once valid Secrets exist the seed starts on exactly their material.
func TestUserSecretsMissingThenProvided(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ec := userCluster(ns, "db", "db-user-peer", "db-user-client")
	if err := env.Client.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	waitMaterialInvalid(t, ec, "db-user-peer", "not found")
	time.Sleep(3 * time.Second) // several reconciles
	requireNoPods(t, ns, "while the user's Secrets are missing")

	peer, cl := newUserPlane(t, "db", ns, pki.Peer), newUserPlane(t, "db", ns, pki.Server)
	// The peer Secret alone: now the client one is named.
	if err := env.Client.Create(ctx, peer.secret(t, ns, "db-user-peer")); err != nil {
		t.Fatal(err)
	}
	waitMaterialInvalid(t, ec, "db-user-client", "not found")
	requireNoPods(t, ns, "while the client plane's Secret is missing")
	if err := env.Client.Create(ctx, cl.secret(t, ns, "db-user-client")); err != nil {
		t.Fatal(err)
	}

	pod := &corev1.Pod{}
	eventually(t, "seed Pod created", func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-0"}, pod)
	})
	var s corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.MemberTLSSecretName("db-0")}, &s); err != nil {
		t.Fatalf("the seed's Secret: %v", err)
	}
	for _, k := range []struct {
		key  string
		want *x509.Certificate
	}{
		{resources.KeyServerCert, cl.leaf.Cert}, {resources.KeyPeerCert, peer.leaf.Cert},
		{resources.KeyClientCA, cl.ca.Cert}, {resources.KeyPeerCA, peer.ca.Cert},
	} {
		if got, want := fingerprints(t, s.Data[k.key]), []string{pki.Fingerprint(k.want)}; strings.Join(got, ",") != want[0] {
			t.Errorf("%s holds %v, want exactly the user's %s", k.key, got, want[0])
		}
	}
	// The keys are the user's too: each validates with its certificate for the member, under the
	// names loadUser demands (the member's .svc host, the client Service on the client plane).
	host := resources.MemberHost("db", ns, "db-0")
	for _, m := range []struct {
		cert, key, ca string
		exp           pki.Expect
	}{
		{resources.KeyServerCert, resources.KeyServerKey, resources.KeyClientCA,
			pki.Expect{Usage: pki.Server, DNSNames: []string{host, resources.ClientServiceName("db") + "." + ns + ".svc"}}},
		{resources.KeyPeerCert, resources.KeyPeerKey, resources.KeyPeerCA, pki.Expect{Usage: pki.Peer, DNSNames: []string{host}}},
	} {
		mat := pki.Material{Cert: s.Data[m.cert], Key: s.Data[m.key], CA: s.Data[m.ca]}
		if err := pki.Validate(mat, m.exp, time.Now()); err != nil {
			t.Errorf("%s/%s: %v", m.cert, m.key, err)
		}
	}
	want := "peer=" + pki.Fingerprint(peer.ca.Cert) + ";client=" + pki.Fingerprint(cl.ca.Cert)
	if got := pod.Annotations[stewardv1.AnnotationTrust]; got != want {
		t.Errorf("seed Pod trust annotation %q, want %q", got, want)
	}
	if p, c := tlsplan.ParsePlaneTrust(pod.Annotations[stewardv1.AnnotationTrust]); len(p) != 1 || p[0] != pki.Fingerprint(peer.ca.Cert) || len(c) != 1 || c[0] != pki.Fingerprint(cl.ca.Cert) {
		t.Errorf("annotation reads back as peer=%v client=%v", p, c)
	}
	eventually(t, "TLSMaterialValid=True", func() error {
		var cur stewardv1.EtcdCluster
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), &cur); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(cur.Status.Conditions, "TLSMaterialValid"); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
	// Steward made no CA of its own.
	var all corev1.SecretList
	if err := env.Client.List(ctx, &all, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, x := range all.Items {
		if x.Name == resources.CASecretName("db") {
			t.Errorf("Secret %s exists: with source Secret Steward runs no CA", x.Name)
		}
	}
}

// A user Secret whose tls.key does not belong to its tls.crt is refused before anything starts,
// and the condition names the Secret, the key and the reason.
func TestUserSecretKeyMismatch(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	peer, cl := newUserPlane(t, "db", ns, pki.Peer), newUserPlane(t, "db", ns, pki.Server)
	bad := cl.secret(t, ns, "db-user-client")
	other, err := peer.leaf.Material(peer.ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	bad.Data[pki.KeyKey] = other.Key // the peer leaf's key
	for _, s := range []*corev1.Secret{peer.secret(t, ns, "db-user-peer"), bad} {
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	ec := userCluster(ns, "db", "db-user-peer", "db-user-client")
	if err := env.Client.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	c := waitMaterialInvalid(t, ec, "db-user-client", pki.KeyKey, string(pki.KeyMismatch))
	if strings.Contains(c.Message, "db-user-peer") {
		t.Errorf("message %q blames the valid peer Secret", c.Message)
	}
	time.Sleep(3 * time.Second)
	requireNoPods(t, ns, "with a mismatched key")
	var s corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.MemberTLSSecretName("db-0")}, &s); err == nil {
		t.Errorf("member Secret %s written from refused material", s.Name)
	}
}
