package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNewCA(t *testing.T) {
	ca := mustCA(t, "etcd", t0)
	c := ca.Cert
	if !c.IsCA || !c.BasicConstraintsValid || c.MaxPathLen != 1 || c.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("not a CA admitting its cross-signed successor: IsCA=%v BC=%v pathlen=%v usage=%v", c.IsCA, c.BasicConstraintsValid, c.MaxPathLen, c.KeyUsage)
	}
	if !strings.Contains(c.Subject.CommonName, "db/etcd") {
		t.Errorf("subject %q does not name the cluster", c.Subject.CommonName)
	}
	if got := c.NotAfter.Sub(t0); got != DefaultCALifetime {
		t.Errorf("lifetime %v, want %v", got, DefaultCALifetime)
	}
	if !c.NotBefore.Equal(t0.Add(-Backdate)) {
		t.Errorf("NotBefore %v, want backdated to %v", c.NotBefore, t0.Add(-Backdate))
	}
	if k, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Errorf("key %T, want ECDSA P-256", c.PublicKey)
	}
	if len(c.SubjectKeyId) == 0 {
		t.Error("no SubjectKeyId: leaves would carry no AuthorityKeyId")
	}
	if err := c.CheckSignatureFrom(c); err != nil {
		t.Errorf("not self-signed: %v", err)
	}
	short, err := NewCA("etcd", "db", t0, time.Hour)
	if err != nil || short.Cert.NotAfter != t0.Add(time.Hour) {
		t.Errorf("configured lifetime ignored: %v %v", err, short.Cert.NotAfter)
	}
	if _, err := NewCA("", "db", t0, 0); err == nil {
		t.Error("a CA without a cluster name was created")
	}
}

func TestCAPEMRoundTrip(t *testing.T) {
	ca := mustCA(t, "etcd", t0)
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	back, err := LoadCA(ca.CertPEM(), keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Cert.Equal(ca.Cert) || !back.Key.Public().(*ecdsa.PublicKey).Equal(ca.Key.Public()) {
		t.Fatal("round trip changed the CA")
	}
	// The reloaded CA signs leaves the original verifies.
	l := mustLeaf(t)(back.IssueClient("x", t0, 0))
	if err := verifyAs(l.Cert, []*x509.Certificate{ca.Cert}, x509.ExtKeyUsageClientAuth, "", t0); err != nil {
		t.Fatal(err)
	}
}

func TestLoadCARefusals(t *testing.T) {
	ca, other := mustCA(t, "etcd", t0), mustCA(t, "other", t0)
	leaf := mustLeaf(t)(ca.IssuePeer(names0, t0, 0))
	caKey, otherKey := mustKeyPEM(t, ca.Key), mustKeyPEM(t, other.Key)
	for _, tt := range []struct {
		name      string
		cert, key []byte
		reason    Reason
		keyName   string
	}{
		{"garbage cert", []byte("nope"), caKey, Malformed, KeyCA},
		{"two certs", BundlePEM(ca.Cert, other.Cert), caKey, Malformed, KeyCA},
		{"garbage key", ca.CertPEM(), []byte("nope"), Malformed, KeyCAKey},
		{"leaf as CA", EncodeCertPEM(leaf.Cert), mustKeyPEM(t, leaf.Key), NotCA, KeyCA},
		{"key of another CA", ca.CertPEM(), otherKey, KeyMismatch, KeyCAKey},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadCA(tt.cert, tt.key)
			var inv *Invalid
			if !errors.As(err, &inv) || inv.Reason != tt.reason || inv.Key != tt.keyName {
				t.Fatalf("err = %v, want %s on %s", err, tt.reason, tt.keyName)
			}
		})
	}
}

func TestParseKeyPEMFormats(t *testing.T) {
	ec := mustKey(t)
	sec1, _ := x509.MarshalECPrivateKey(ec)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		data []byte
		pub  interface{ Equal(crypto.PublicKey) bool }
	}{
		{"PKCS8", mustKeyPEM(t, ec), &ec.PublicKey},
		{"SEC1 after a certificate block", append(EncodeCertPEM(mustCA(t, "x", t0).Cert), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1})...), &ec.PublicKey},
		{"PKCS1 RSA", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)}), &rsaKey.PublicKey},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k, err := ParseKeyPEM(tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.pub.Equal(k.Public()) {
				t.Fatal("parsed a different key")
			}
		})
	}
	for _, bad := range [][]byte{nil, []byte("garbage"), EncodeCertPEM(mustCA(t, "x", t0).Cert), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2}})} {
		if _, err := ParseKeyPEM(bad); err == nil {
			t.Errorf("ParseKeyPEM(%.20q) accepted", bad)
		}
	}
}

func TestParseCertsPEM(t *testing.T) {
	a, b := mustCA(t, "a", t0), mustCA(t, "b", t0)
	both := BundlePEM(a.Cert, b.Cert)
	certs, err := ParseCertsPEM(append([]byte("# comment line\n"), both...))
	if err != nil || len(certs) != 2 {
		t.Fatalf("got %d certs, %v", len(certs), err)
	}
	for name, bad := range map[string][]byte{
		"empty":             nil,
		"not PEM":           []byte("-----BEGIN nothing"),
		"key only":          mustKeyPEM(t, a.Key),
		"bad DER":           pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("xx")}),
		"trailing garbage":  append(bytes.Clone(both), "junk"...),
		"truncated 2nd PEM": both[:len(both)-40],
	} {
		if _, err := ParseCertsPEM(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
