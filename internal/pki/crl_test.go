package pki

import (
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

// A revocation list parses back as DER (what etcd's --client-crl-file reads), is signed by the
// CA and no other, lists exactly the revoked serials once each, and an empty one is valid.
func TestRevocationList(t *testing.T) {
	ca := mustCA(t, "etcd", t0)
	other := mustCA(t, "etcd", t0)
	a := mustLeaf(t)(ca.IssueClient("tenant-a", t0, 0))
	b := mustLeaf(t)(ca.IssueClient("tenant-b", t0, 0))
	kept := mustLeaf(t)(ca.IssueClient("tenant-c", t0, 0))
	now := t0.Add(time.Hour)
	revokedA := t0.Add(10 * time.Minute)

	der, err := ca.RevocationList([]RevokedSerial{
		{Serial: b.Cert.SerialNumber},                                      // revoked "now"
		{Serial: a.Cert.SerialNumber, RevokedAt: t0.Add(20 * time.Minute)}, // listed twice: the earliest stays
		{Serial: a.Cert.SerialNumber, RevokedAt: revokedA},
	}, 7, now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if blk, _ := pem.Decode(der); blk != nil {
		t.Fatal("the list is PEM; etcd reads DER")
	}
	crl, err := x509.ParseRevocationList(der)
	if err != nil {
		t.Fatalf("parsing the list as DER: %v", err)
	}
	if err := crl.CheckSignatureFrom(ca.Cert); err != nil {
		t.Errorf("the list's signature does not check against its CA: %v", err)
	}
	if err := crl.CheckSignatureFrom(other.Cert); err == nil {
		t.Error("the list's signature checks against another CA")
	}
	if crl.Number.Int64() != 7 {
		t.Errorf("number %v, want 7", crl.Number)
	}
	if !crl.ThisUpdate.Equal(now.Add(-Backdate)) || !crl.NextUpdate.Equal(now.Add(24*time.Hour)) {
		t.Errorf("this update %v, next update %v; want %v and %v", crl.ThisUpdate, crl.NextUpdate, now.Add(-Backdate), now.Add(24*time.Hour))
	}
	if string(crl.RawIssuer) != string(ca.Cert.RawSubject) || string(crl.AuthorityKeyId) != string(ca.Cert.SubjectKeyId) {
		t.Error("the list does not name its CA as issuer")
	}
	got := map[string]time.Time{}
	for _, e := range crl.RevokedCertificateEntries {
		if _, dup := got[e.SerialNumber.Text(16)]; dup {
			t.Errorf("serial %x listed twice", e.SerialNumber)
		}
		got[e.SerialNumber.Text(16)] = e.RevocationTime
	}
	want := map[string]time.Time{a.Cert.SerialNumber.Text(16): revokedA, b.Cert.SerialNumber.Text(16): now}
	if len(got) != len(want) {
		t.Errorf("%d entries, want %d", len(got), len(want))
	}
	for s, at := range want {
		if g, ok := got[s]; !ok || !g.Equal(at) {
			t.Errorf("serial %s: revoked at %v (listed %v), want %v", s, g, ok, at)
		}
	}
	if _, ok := got[kept.Cert.SerialNumber.Text(16)]; ok {
		t.Error("a certificate nobody revoked is listed")
	}

	empty, err := ca.RevocationList(nil, 0, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	ecrl, err := x509.ParseRevocationList(empty)
	if err != nil {
		t.Fatalf("parsing the empty list: %v", err)
	}
	if err := ecrl.CheckSignatureFrom(ca.Cert); err != nil || len(ecrl.RevokedCertificateEntries) != 0 {
		t.Errorf("empty list: signature %v, %d entries; want a valid list of none", err, len(ecrl.RevokedCertificateEntries))
	}
	if !ecrl.NextUpdate.Equal(now.Add(DefaultCRLLifetime)) {
		t.Errorf("next update %v, want the default lifetime's %v", ecrl.NextUpdate, now.Add(DefaultCRLLifetime))
	}
}

func TestRevocationListRefuses(t *testing.T) {
	ca := mustCA(t, "etcd", t0)
	if _, err := ca.RevocationList([]RevokedSerial{{}}, 1, t0, 0); err == nil {
		t.Error("an entry without a serial was accepted")
	}
	if _, err := ca.RevocationList([]RevokedSerial{{Serial: big.NewInt(-1)}}, 1, t0, 0); err == nil {
		t.Error("a negative serial was accepted")
	}
	if _, err := ca.RevocationList(nil, -1, t0, 0); err == nil {
		t.Error("a negative CRL number was accepted")
	}
	if _, err := ca.RevocationList(nil, 1, ca.Cert.NotAfter, 0); err == nil {
		t.Error("an expired CA signed a list")
	}
	// Never current past the CA's end.
	late := ca.Cert.NotAfter.Add(-time.Hour)
	der, err := ca.RevocationList(nil, 1, late, 0)
	if err != nil {
		t.Fatal(err)
	}
	crl, err := x509.ParseRevocationList(der)
	if err != nil {
		t.Fatal(err)
	}
	if !crl.NextUpdate.Equal(ca.Cert.NotAfter) {
		t.Errorf("next update %v, want the CA's end %v", crl.NextUpdate, ca.Cert.NotAfter)
	}
	// A CA without the CRL-signing key usage cannot sign one; x509 says so.
	key := mustKey(t)
	noCRL := &CA{Key: key, Cert: craft(t, &x509.Certificate{IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		SubjectKeyId: []byte{1, 2, 3}, NotBefore: t0, NotAfter: t0.Add(time.Hour)}, key, nil)}
	if _, err := noCRL.RevocationList(nil, 1, t0, 0); err == nil || !strings.Contains(err.Error(), "crlSign") {
		t.Errorf("a CA without cRLSign: %v, want x509's refusal naming crlSign", err)
	}
}
