package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"testing"
	"time"
)

// t0 is the injected clock of every test: nothing here reads the wall clock.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var names0 = MemberNames{Cluster: "etcd", Namespace: "db", Member: "etcd-0"}

func mustCA(t *testing.T, cluster string, now time.Time) *CA {
	t.Helper()
	ca, err := NewCA(cluster, "db", now, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// mustLeaf(t)(ca.IssueX(...)) fails the test on an issuance error.
func mustLeaf(t *testing.T) func(*Leaf, error) *Leaf {
	return func(l *Leaf, err error) *Leaf {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
}

func mustKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// craft signs an arbitrary template with signer (self-signed when signer is nil), for the bad
// inputs Steward itself would never issue.
func craft(t *testing.T, tmpl *x509.Certificate, key crypto.Signer, signer *CA) *x509.Certificate {
	t.Helper()
	if tmpl.SerialNumber == nil {
		tmpl.SerialNumber = big.NewInt(42)
	}
	if tmpl.Subject.CommonName == "" {
		tmpl.Subject = pkix.Name{CommonName: "crafted"}
	}
	parent, signKey := tmpl, key
	if signer != nil {
		parent, signKey = signer.Cert, signer.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustMaterial(t *testing.T, l *Leaf, trust ...*x509.Certificate) Material {
	t.Helper()
	m, err := l.Material(trust...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustKeyPEM(t *testing.T, k crypto.Signer) []byte {
	t.Helper()
	b, err := EncodeKeyPEM(k)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// verifyAs is the handshake check: does a peer trusting pool accept c for usage u (and, for a
// server certificate, for host)?
func verifyAs(c *x509.Certificate, pool []*x509.Certificate, u x509.ExtKeyUsage, host string, now time.Time) error {
	_, err := c.Verify(x509.VerifyOptions{Roots: Pool(pool), DNSName: host, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{u}})
	return err
}
