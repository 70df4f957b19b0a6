package tlsplan

import (
	"crypto/x509"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/internal/resources"
)

// t0 is the injected clock of every test: nothing here reads the wall clock.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	testCluster   = "etcd"
	testNamespace = "db"
	testDomain    = "cluster.local"
	day           = 24 * time.Hour
	leafLife      = 90 * day
	caLife        = 5 * 365 * day
	fraction      = 2.0 / 3.0
)

// memberNames are the members of a test cluster of n, named as the controller names them.
func memberNames(n int) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = resources.MemberName(testCluster, int32(i))
	}
	return out
}

func names(member string) pki.MemberNames {
	return pki.MemberNames{Cluster: testCluster, Namespace: testNamespace, Member: member, ClusterDomain: testDomain}
}

// facts are the settings every test shares, with the given CAs and clock.
func facts(now time.Time, ca, next *pki.CA) Facts {
	return Facts{Cluster: testCluster, Namespace: testNamespace, ClusterDomain: testDomain, Now: now,
		LeafLifetime: leafLife, CALifetime: caLife, RenewFraction: fraction, CA: ca, NextCA: next}
}

func mustCA(t *testing.T, now time.Time, life time.Duration) *pki.CA {
	t.Helper()
	ca, err := pki.NewCA(testCluster, testNamespace, now, life)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// mustLeaf(t)(ca.IssueX(...)) fails the test on an issuance error.
func mustLeaf(t *testing.T) func(*pki.Leaf, error) *pki.Leaf {
	return func(l *pki.Leaf, err error) *pki.Leaf {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
}

// memberSecret is what Steward would have written for member at issued: both leaves from ca,
// with the given trust bundle.
func memberSecret(t *testing.T, ca *pki.CA, member string, issued time.Time, trust ...*x509.Certificate) *MemberSecret {
	t.Helper()
	return &MemberSecret{
		Server: mustLeaf(t)(ca.IssueServer(names(member), issued, leafLife)),
		Peer:   mustLeaf(t)(ca.IssuePeer(names(member), issued, leafLife)),
		Trust:  pki.Bundle(trust...),
	}
}

func appClient(t *testing.T, ca *pki.CA, issued time.Time, trust ...*x509.Certificate) *Material {
	t.Helper()
	return &Material{Leaf: mustLeaf(t)(ca.IssueClient(testCluster+"-client", issued, leafLife)), Trust: pki.Bundle(trust...)}
}

// fps are the sorted fingerprints of the CAs, as ParseTrust returns a Pod's annotation.
func fps(cas ...*pki.CA) []string {
	var certs []*x509.Certificate
	for _, ca := range cas {
		certs = append(certs, ca.Cert)
	}
	return ParseTrust(FormatTrust(certs))
}

// steady is an n-member cluster that has run on ca since issued: every Secret written then, every
// Pod started trusting ca alone and serving its Secret's server leaf, the application client
// Secret in place.
func steady(t *testing.T, n int, ca *pki.CA, issued, now time.Time) Facts {
	t.Helper()
	f := facts(now, ca, nil)
	for _, name := range memberNames(n) {
		s := memberSecret(t, ca, name, issued, ca.Cert)
		f.Members = append(f.Members, Member{Name: name, Secret: s, Pod: &Pod{Trust: fps(ca), Served: s.Server.Cert}})
	}
	f.AppClient = appClient(t, ca, issued, ca.Cert)
	return f
}

// serveSecrets makes every Pod present the leaf its Secret holds (the kubelet caught up).
func serveSecrets(f *Facts) {
	for i := range f.Members {
		if m := f.Members[i]; m.Pod != nil && m.Secret != nil {
			m.Pod.Served = m.Secret.Server.Cert
		}
	}
}

// applyWrites lands a decision's Secret writes in f, as the controller does before the next
// reconcile reads them.
// landStep carries out one decision as the controller and the kubelet would: the writes land, every
// member's mounted Secret reads back what was written, and the highest-ordinal outdated member
// restarts.
func landStep(f *Facts, d Decision) {
	applyWrites(f, d)
	for i := range f.Members {
		s := readBack(*f.Members[i].Secret)
		f.Members[i].Secret = &s
	}
	if out := outdatedNames(d); len(out) > 0 {
		restartMember(f, out[len(out)-1])
	}
}

func applyWrites(f *Facts, d Decision) {
	if d.WriteCA != nil {
		f.CA, f.NextCA = d.WriteCA.Current, d.WriteCA.Next
	}
	for _, w := range d.WriteMembers {
		for i := range f.Members {
			if f.Members[i].Name == w.Name {
				s := w.Secret
				f.Members[i].Secret = &s
			}
		}
	}
	if d.WriteAppClient != nil {
		f.AppClient = d.WriteAppClient
	}
}

func signedBy(c *x509.Certificate, ca *pki.CA) bool {
	return ca != nil && c.CheckSignatureFrom(ca.Cert) == nil
}

func sameCert(a, b *x509.Certificate) bool {
	return a != nil && b != nil && pki.Fingerprint(a) == pki.Fingerprint(b)
}

func write(d Decision, member string) *MemberWrite {
	i := slices.IndexFunc(d.WriteMembers, func(w MemberWrite) bool { return w.Name == member })
	if i < 0 {
		return nil
	}
	return &d.WriteMembers[i]
}

func writtenNames(d Decision) []string {
	var out []string
	for _, w := range d.WriteMembers {
		out = append(out, w.Name)
	}
	slices.Sort(out)
	return out
}

func outdatedNames(d Decision) []string {
	var out []string
	for name, ok := range d.TrustOutdated {
		if ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// requireNoOp fails unless the decision leaves everything as it is.
func requireNoOp(t *testing.T, d Decision) {
	t.Helper()
	if d.WriteCA != nil || len(d.WriteMembers) > 0 || d.WriteAppClient != nil || len(outdatedNames(d)) > 0 ||
		d.Hold != "" || d.Pending != "" || d.Pass != pki.Done {
		t.Fatalf("want a no-op, got WriteCA=%v members=%v app=%v outdated=%v hold=%q pending=%q pass=%s",
			d.WriteCA != nil, writtenNames(d), d.WriteAppClient != nil, outdatedNames(d), d.Hold, d.Pending, d.Pass)
	}
}

// verify is one side of a handshake: does a party trusting pool accept c for usage u (and, for a
// certificate presented as a server, for host)?
func verify(c *x509.Certificate, pool []*x509.Certificate, u x509.ExtKeyUsage, host string, now time.Time) error {
	_, err := c.Verify(x509.VerifyOptions{Roots: pki.Pool(pool), DNSName: host, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{u}})
	return err
}

// verifyLeaf is verify for a party that presents the leaf with its chain, as TLS sends it.
func verifyLeaf(l *pki.Leaf, pool []*x509.Certificate, u x509.ExtKeyUsage, host string, now time.Time) error {
	_, err := l.Cert.Verify(x509.VerifyOptions{Roots: pki.Pool(pool), Intermediates: pki.Pool(l.Chain), DNSName: host,
		CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{u}})
	return err
}

// mentions reports whether s names every one of the words.
func mentions(s string, words ...string) bool {
	for _, w := range words {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}
