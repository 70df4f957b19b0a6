package pki

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"
	"time"
)

// chainVerify is a TLS client's check of a server that sends leaf then chain.
func chainVerify(l *Leaf, roots []*x509.Certificate, now time.Time) error {
	_, err := l.Cert.Verify(x509.VerifyOptions{Roots: Pool(roots), Intermediates: Pool(l.Chain), CurrentTime: now,
		DNSName: "etcd-0.etcd.db.svc", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

// A new-signed leaf served with the cross-signed next CA verifies for a client that trusts only
// the old CA, for one that trusts only the new CA, and for one that trusts both; without the
// cross-signed certificate the old-only client refuses it (the failure issue 17 is about).
func TestCrossSign(t *testing.T) {
	old := mustCA(t, "etcd", t0)
	next := mustCA(t, "etcd", t0.Add(time.Hour))
	cross, err := old.CrossSign(next.Cert)
	if err != nil {
		t.Fatal(err)
	}
	if !IsCrossSigned(cross, old.Cert, next.Cert) || IsCrossSigned(next.Cert, old.Cert, next.Cert) || IsCrossSigned(cross, next.Cert, old.Cert) {
		t.Error("IsCrossSigned does not tell the cross-signed certificate from the others")
	}
	leaf := mustLeaf(t)(next.IssueServer(names0, t0.Add(2*time.Hour), 0))
	now := t0.Add(3 * time.Hour)
	if err := chainVerify(leaf, Bundle(old.Cert), now); err == nil {
		t.Fatal("an old-only client verified a new-signed leaf without the cross-signed CA: the test proves nothing")
	}
	served := leaf.WithChain(cross)
	for what, roots := range map[string][]*x509.Certificate{"old only": Bundle(old.Cert), "new only": Bundle(next.Cert), "both": Bundle(old.Cert, next.Cert)} {
		if err := chainVerify(served, roots, now); err != nil {
			t.Errorf("a client trusting %s refuses leaf+cross: %v", what, err)
		}
	}
	// Past the old CA's end the cross-signed path is gone, the direct one stays.
	late := old.Cert.NotAfter.Add(time.Hour)
	if !cross.NotAfter.Equal(old.Cert.NotAfter) {
		t.Errorf("cross NotAfter %v, want the old CA's %v", cross.NotAfter, old.Cert.NotAfter)
	}
	if late.Before(next.Cert.NotAfter) {
		if err := chainVerify(served, Bundle(next.Cert), late); err != nil {
			t.Errorf("after the old CA expired, a new-trusting client refuses leaf+cross: %v", err)
		}
	}
	// The material a member mounts carries the chain, in order.
	m := mustMaterial(t, served, next.Cert)
	certs, err := ParseCertsPEM(m.Cert)
	if err != nil || len(certs) != 2 || Fingerprint(certs[1]) != Fingerprint(cross) {
		t.Errorf("tls.crt holds %d certificates (%v), want leaf then cross", len(certs), err)
	}
}

// A CA with path length 0 (created before cross-signing) cannot vouch for an intermediate: its
// old-only clients cannot be carried through a rotation this way, and AdmitsCrossSigned says so.
func TestCrossSignNeedsPathLength(t *testing.T) {
	key := mustKey(t)
	legacy := &CA{Key: key, Cert: craft(t, &x509.Certificate{Subject: pkix.Name{CommonName: "legacy"}, NotBefore: t0.Add(-time.Hour),
		NotAfter: t0.Add(1000 * time.Hour), IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}, key, nil)}
	next := mustCA(t, "etcd", t0)
	cross, err := legacy.CrossSign(next.Cert)
	if err != nil {
		t.Fatal(err)
	}
	leaf := mustLeaf(t)(next.IssueServer(names0, t0, 0)).WithChain(cross)
	if err := chainVerify(leaf, Bundle(legacy.Cert), t0.Add(time.Minute)); err == nil {
		t.Error("a path-length-0 root verified a chain through an intermediate")
	}
	if AdmitsCrossSigned(legacy.Cert) || !AdmitsCrossSigned(next.Cert) {
		t.Errorf("AdmitsCrossSigned: legacy %v, new %v", AdmitsCrossSigned(legacy.Cert), AdmitsCrossSigned(next.Cert))
	}
}
