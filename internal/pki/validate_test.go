package pki

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"
)

// Every refusal reason, each triggered by the one defect it names, on otherwise good material.
func TestValidateRefusals(t *testing.T) {
	ca, other := mustCA(t, "etcd", t0), mustCA(t, "etcd", t0)
	server := mustLeaf(t)(ca.IssueServer(names0, t0, 0))
	good := mustMaterial(t, server, ca.Cert)
	expServer := ExpectMember(Server, names0)
	with := func(f func(m *Material)) Material { m := good; f(&m); return m }

	peer := mustLeaf(t)(ca.IssuePeer(names0, t0, 0))
	client := mustLeaf(t)(ca.IssueClient("app", t0, 0))
	foreign := mustLeaf(t)(other.IssueServer(names0, t0, 0))
	future := mustLeaf(t)(ca.IssueServer(names0, t0.Add(time.Hour), 0))
	noCertSign := craft(t, &x509.Certificate{IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature,
		NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(time.Hour)}, mustKey(t), nil)
	// A CA that becomes valid only later, though the leaf it signed already is.
	lateCAKey := mustKey(t)
	lateCA := &CA{Key: lateCAKey, Cert: craft(t, &x509.Certificate{IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		NotBefore: t0.Add(time.Hour), NotAfter: t0.Add(48 * time.Hour)}, lateCAKey, nil)}
	earlyLeafKey := mustKey(t)
	earlyLeaf := craft(t, &x509.Certificate{NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(24 * time.Hour),
		ExtKeyUsage: Server.ExtKeyUsages(), DNSNames: expServer.DNSNames, IPAddresses: expServer.IPs}, earlyLeafKey, lateCA)
	// A leaf signed by a certificate that is not a CA, presented with that certificate as its
	// intermediate: x509's own path building refuses it.
	rogueKey := mustKey(t)
	rogueSigner := &CA{Cert: peer.Cert, Key: peer.Key}
	rogue := craft(t, &x509.Certificate{NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(time.Hour),
		ExtKeyUsage: Server.ExtKeyUsages(), DNSNames: expServer.DNSNames, IPAddresses: expServer.IPs}, rogueKey, rogueSigner)

	for _, tt := range []struct {
		name   string
		m      Material
		exp    Expect
		now    time.Time
		reason Reason
		key    string
	}{
		{"garbage tls.crt", with(func(m *Material) { m.Cert = []byte("not a certificate") }), expServer, t0, Malformed, KeyCert},
		{"garbage tls.key", with(func(m *Material) { m.Key = []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n") }), expServer, t0, Malformed, KeyKey},
		{"garbage ca.crt", with(func(m *Material) { m.CA = nil }), expServer, t0, Malformed, KeyCA},
		{"key of another certificate", with(func(m *Material) { m.Key = mustKeyPEM(t, peer.Key) }), expServer, t0, KeyMismatch, KeyKey},
		{"peer cert used as server: no client Service name", with(func(m *Material) {
			m.Cert, m.Key = EncodeCertPEM(peer.Cert), mustKeyPEM(t, peer.Key)
		}), expServer, t0, MissingSAN, KeyCert},
		{"missing loopback IP", good, Expect{Usage: Server, IPs: []net.IP{net.ParseIP("10.0.0.1")}}, t0, MissingSAN, KeyCert},
		{"other member's name", good, ExpectMember(Peer, MemberNames{Cluster: "etcd", Namespace: "db", Member: "etcd-1"}), t0, MissingSAN, KeyCert},
		{"expired", good, expServer, server.Cert.NotAfter.Add(time.Second), Expired, KeyCert},
		{"not yet valid", mustMaterial(t, future, ca.Cert), expServer, t0, NotYetValid, KeyCert},
		{"client-only cert used as server", mustMaterial(t, client, ca.Cert), expServer, t0, WrongUsage, KeyCert},
		{"client-only cert used as peer", mustMaterial(t, client, ca.Cert), Expect{Usage: Peer}, t0, WrongUsage, KeyCert},
		{"chain to another CA", mustMaterial(t, foreign, ca.Cert), expServer, t0, UntrustedChain, KeyCA},
		{"leaf passed as CA", with(func(m *Material) { m.CA = EncodeCertPEM(server.Cert) }), expServer, t0, NotCA, KeyCA},
		{"CA without certSign", with(func(m *Material) { m.CA = EncodeCertPEM(noCertSign) }), expServer, t0, NotCA, KeyCA},
		{"CA not yet valid", Material{Cert: EncodeCertPEM(earlyLeaf), Key: mustKeyPEM(t, earlyLeafKey), CA: EncodeCertPEM(lateCA.Cert)}, expServer, t0, NotYetValid, KeyCA},
		{"signed by a leaf posing as intermediate", Material{Cert: EncodeCertPEM(rogue, peer.Cert), Key: mustKeyPEM(t, rogueKey), CA: EncodeCertPEM(ca.Cert)}, expServer, t0, UntrustedChain, KeyCA},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.m, tt.exp, tt.now)
			var inv *Invalid
			if !errors.As(err, &inv) || inv.Reason != tt.reason || inv.Key != tt.key {
				t.Fatalf("err = %v, want %s on %s", err, tt.reason, tt.key)
			}
			if inv.Detail == "" || !strings.Contains(err.Error(), string(tt.reason)) || ReasonOf(err) != tt.reason {
				t.Errorf("refusal does not explain itself: %q", err)
			}
		})
	}
	// The control: the unmodified material passes, so each refusal above is due to its defect.
	if err := Validate(good, expServer, t0); err != nil {
		t.Fatalf("good material refused: %v", err)
	}
}

func TestValidateBoundaries(t *testing.T) {
	ca := mustCA(t, "etcd", t0)
	l := mustLeaf(t)(ca.IssuePeer(names0, t0, time.Hour))
	m, exp := mustMaterial(t, l, ca.Cert), ExpectMember(Peer, names0)
	for _, tt := range []struct {
		now    time.Time
		reason Reason
	}{
		{l.Cert.NotBefore.Add(-time.Second), NotYetValid},
		{l.Cert.NotBefore, ""},
		{l.Cert.NotAfter, ""},
		{l.Cert.NotAfter.Add(time.Second), Expired},
	} {
		if got := ReasonOf(Validate(m, exp, tt.now)); got != tt.reason {
			t.Errorf("at %v: %q, want %q", tt.now, got, tt.reason)
		}
	}
}

// User material comes in many shapes: RSA keys, PKCS#1, a leaf followed by its intermediate, a
// bundle holding an unrelated CA besides the right one, a wildcard SAN.
func TestValidateAcceptsUserMaterial(t *testing.T) {
	// A user's root allowing intermediates (Steward's own CA does not: see below).
	rootKey := mustKey(t)
	root := &CA{Key: rootKey, Cert: craft(t, &x509.Certificate{IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(1000 * time.Hour)}, rootKey, nil)}
	interKey := mustKey(t)
	inter := &CA{Key: interKey, Cert: craft(t, &x509.Certificate{IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		Subject: root.Cert.Subject, NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(1000 * time.Hour)}, interKey, root)}
	inter.Cert.Subject.CommonName = "intermediate"
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	leaf := craft(t, &x509.Certificate{NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(100 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"*.etcd.db.svc", "etcd-0"}}, rsaKey, inter)
	m := Material{
		Cert: EncodeCertPEM(leaf, inter.Cert),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)}),
		CA:   BundlePEM(mustCA(t, "unrelated", t0).Cert, root.Cert),
	}
	exp := Expect{Usage: Peer, DNSNames: []string{"etcd-0", "etcd-0.etcd.db.svc"}}
	if err := Validate(m, exp, t0); err != nil {
		t.Fatal(err)
	}
	// Two intermediates under a Steward CA (path length 1: room for its cross-signed successor
	// only) are refused: nothing may extend the operator's CA further.
	steward := mustCA(t, "etcd", t0)
	inter2 := &CA{Key: interKey, Cert: craft(t, &x509.Certificate{IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		Subject: pkix.Name{CommonName: "inter2"}, NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(1000 * time.Hour)}, interKey, steward)}
	inter3Key := mustKey(t)
	inter3 := &CA{Key: inter3Key, Cert: craft(t, &x509.Certificate{IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		Subject: pkix.Name{CommonName: "inter3"}, SerialNumber: big.NewInt(43), NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(1000 * time.Hour)}, inter3Key, inter2)}
	leaf2 := craft(t, &x509.Certificate{NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(100 * time.Hour), DNSNames: exp.DNSNames}, rsaKey, inter3)
	m2 := Material{Cert: EncodeCertPEM(leaf2, inter3.Cert, inter2.Cert), Key: m.Key, CA: steward.CertPEM()}
	if got := ReasonOf(Validate(m2, exp, t0)); got != UntrustedChain {
		t.Fatalf("two intermediates under a Steward CA: %q, want UntrustedChain", got)
	}
	// Without the intermediate the chain breaks, and Validate says so.
	m.Cert = EncodeCertPEM(leaf)
	if got := ReasonOf(Validate(m, exp, t0)); got != UntrustedChain {
		t.Fatalf("without intermediate: %q, want UntrustedChain", got)
	}
}

// A certificate without any extended key usage is valid for every use in Go (and so in etcd);
// Validate follows that rule instead of inventing a stricter one.
func TestValidateNoExtKeyUsageMeansAny(t *testing.T) {
	ca := mustCA(t, "etcd", t0)
	key := mustKey(t)
	c := craft(t, &x509.Certificate{NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(time.Hour), DNSNames: []string{"etcd-0"}}, key, ca)
	m := Material{Cert: EncodeCertPEM(c), Key: mustKeyPEM(t, key), CA: ca.CertPEM()}
	if err := Validate(m, Expect{Usage: Peer, DNSNames: []string{"etcd-0"}}, t0); err != nil {
		t.Fatal(err)
	}
}
