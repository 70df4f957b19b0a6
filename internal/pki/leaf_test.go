package pki

import (
	"crypto/x509"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
)

func TestSANs(t *testing.T) {
	for _, tt := range []struct {
		name                        string
		cluster, ns, member, domain string
		want                        []string
	}{
		{"default domain", "etcd", "db", "etcd-0", "", []string{
			"etcd-0", "etcd-0.etcd", "etcd-0.etcd.db", "etcd-0.etcd.db.svc", "etcd-0.etcd.db.svc.cluster.local",
			"etcd-client", "etcd-client.db", "etcd-client.db.svc", "etcd-client.db.svc.cluster.local",
			"etcd", "etcd.db", "etcd.db.svc", "etcd.db.svc.cluster.local",
			"localhost",
		}},
		{"custom domain", "main", "prod", "main-12", "k8s.example", []string{
			"main-12", "main-12.main", "main-12.main.prod", "main-12.main.prod.svc", "main-12.main.prod.svc.k8s.example",
			"main-client", "main-client.prod", "main-client.prod.svc", "main-client.prod.svc.k8s.example",
			"main", "main.prod", "main.prod.svc", "main.prod.svc.k8s.example",
			"localhost",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dns, ips := SANs(tt.cluster, tt.ns, tt.member, tt.domain)
			if !slices.Equal(dns, tt.want) {
				t.Errorf("dns =\n%q\nwant\n%q", dns, tt.want)
			}
			if len(ips) != 2 || !ips[0].Equal(net.ParseIP("127.0.0.1")) || !ips[1].Equal(net.ParseIP("::1")) {
				t.Errorf("ips = %v, want loopback v4 and v6", ips)
			}
		})
	}
}

// The host of the peer URL etcd dials is what it checks the peer certificate against, so the peer
// SANs must contain it exactly as internal/resources builds it.
func TestPeerSANsCoverPeerURLHost(t *testing.T) {
	host := resources.MemberHost(names0.Cluster, names0.Namespace, names0.Member)
	if !slices.Contains(MemberDNSNames(names0), host) {
		t.Fatalf("peer SANs %v lack the peer URL host %s", MemberDNSNames(names0), host)
	}
	if !strings.Contains(resources.PeerURL(&stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: names0.Cluster, Namespace: names0.Namespace}}, names0.Member), host) {
		t.Fatal("resources changed how peer URLs are built; revisit MemberDNSNames")
	}
}

// Every peer certificate names the peer identity etcd admits peers by; a client certificate names
// no host, so it is refused on the peer port.
func TestPeerIdentity(t *testing.T) {
	ca := mustCA(t, "etcd", t0)
	id := PeerIdentity(names0.Cluster, names0.Namespace)
	if peer := mustLeaf(t)(ca.IssuePeer(names0, t0, 0)); peer.Cert.VerifyHostname(id) != nil {
		t.Errorf("peer certificate %v lacks %s", peer.Cert.DNSNames, id)
	}
	if client := mustLeaf(t)(ca.IssueClient("app", t0, 0)); client.Cert.VerifyHostname(id) == nil {
		t.Errorf("a client certificate passes as peer %s", id)
	}
	if other := PeerIdentity("other", names0.Namespace); mustLeaf(t)(ca.IssuePeer(names0, t0, 0)).Cert.VerifyHostname(other) == nil {
		t.Error("a peer certificate passes for another cluster")
	}
}

func TestIssuedLeavesVerify(t *testing.T) {
	ca, other := mustCA(t, "etcd", t0), mustCA(t, "etcd", t0)
	trust := []*x509.Certificate{ca.Cert}
	server := mustLeaf(t)(ca.IssueServer(names0, t0, 0))
	peer := mustLeaf(t)(ca.IssuePeer(names0, t0, 0))
	client := mustLeaf(t)(ca.IssueClient("steward-operator", t0, 0))
	loopback := mustLeaf(t)(ca.IssueLoopback("restore-drill", t0, 0))
	serverDNS, serverIPs := SANs(names0.Cluster, names0.Namespace, names0.Member, "")
	if err := verifyAs(loopback.Cert, trust, x509.ExtKeyUsageServerAuth, "localhost", t0); err == nil {
		t.Error("a loopback certificate verifies for localhost; it names 127.0.0.1 only")
	}

	for _, tt := range []struct {
		name  string
		leaf  *Leaf
		hosts []string
		ok    []x509.ExtKeyUsage
		bad   []x509.ExtKeyUsage
	}{
		{"server", server, append(slices.Clone(serverDNS), "127.0.0.1", "::1"),
			[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			[]x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}},
		{"peer", peer, PeerDNSNames(names0),
			[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			[]x509.ExtKeyUsage{x509.ExtKeyUsageEmailProtection}},
		{"loopback", loopback, []string{"127.0.0.1"},
			[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			[]x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}},
		{"client", client, nil,
			[]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.leaf.Cert.NotAfter.Sub(t0); got != DefaultLeafLifetime {
				t.Errorf("lifetime %v, want %v", got, DefaultLeafLifetime)
			}
			if tt.leaf.Cert.IsCA {
				t.Error("a leaf is a CA")
			}
			for _, u := range tt.ok {
				for _, h := range append([]string{""}, tt.hosts...) {
					if err := verifyAs(tt.leaf.Cert, trust, u, h, t0); err != nil {
						t.Errorf("usage %v host %q: %v", u, h, err)
					}
				}
				if err := verifyAs(tt.leaf.Cert, []*x509.Certificate{other.Cert}, u, "", t0); err == nil {
					t.Errorf("usage %v verified against an unrelated CA", u)
				}
			}
			for _, u := range tt.bad {
				if err := verifyAs(tt.leaf.Cert, trust, u, "", t0); err == nil {
					t.Errorf("wrong usage %v accepted", u)
				}
			}
			if err := verifyAs(tt.leaf.Cert, trust, tt.ok[0], "etcd-1.etcd.db.svc", t0); err == nil {
				t.Error("another member's name accepted")
			}
		})
	}
	if len(peer.Cert.IPAddresses) != 0 || slices.Contains(peer.Cert.DNSNames, "etcd-client") {
		t.Errorf("peer certificate carries client-plane names: %v %v", peer.Cert.DNSNames, peer.Cert.IPAddresses)
	}
	if client.Cert.Subject.CommonName != "steward-operator" || len(client.Cert.DNSNames) != 0 {
		t.Errorf("client certificate: CN %q, DNS %v", client.Cert.Subject.CommonName, client.Cert.DNSNames)
	}
	if !slices.Equal(server.Cert.DNSNames, serverDNS) || len(server.Cert.IPAddresses) != len(serverIPs) {
		t.Errorf("server SANs %v %v differ from SANs()", server.Cert.DNSNames, server.Cert.IPAddresses)
	}
}

func TestLeafLifetime(t *testing.T) {
	ca := mustCA(t, "etcd", t0)
	l := mustLeaf(t)(ca.IssueClient("x", t0, 24*time.Hour))
	if !l.Cert.NotAfter.Equal(t0.Add(24*time.Hour)) || !l.Cert.NotBefore.Equal(t0.Add(-Backdate)) {
		t.Errorf("validity %v..%v", l.Cert.NotBefore, l.Cert.NotAfter)
	}
	// Near the CA's end a leaf is cut to the CA's NotAfter rather than outliving it.
	late := ca.Cert.NotAfter.Add(-time.Hour)
	l = mustLeaf(t)(ca.IssueServer(names0, late, 0))
	if !l.Cert.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Errorf("leaf ends %v, CA ends %v", l.Cert.NotAfter, ca.Cert.NotAfter)
	}
	if _, err := ca.IssuePeer(names0, ca.Cert.NotAfter, 0); err == nil {
		t.Error("issued from an expired CA")
	}
	if _, err := ca.IssueClient("", t0, 0); err == nil {
		t.Error("issued a nameless client certificate")
	}
}

func TestLeafMaterialValidates(t *testing.T) {
	ca := mustCA(t, "etcd", t0)
	for u, l := range map[Usage]*Leaf{
		Server: mustLeaf(t)(ca.IssueServer(names0, t0, 0)),
		Peer:   mustLeaf(t)(ca.IssuePeer(names0, t0, 0)),
	} {
		if err := Validate(mustMaterial(t, l, ca.Cert), ExpectMember(u, names0), t0); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	cl := mustLeaf(t)(ca.IssueClient("app", t0, 0))
	if err := Validate(mustMaterial(t, cl, ca.Cert), Expect{Usage: Client}, t0); err != nil {
		t.Error(err)
	}
}
