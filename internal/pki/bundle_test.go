package pki

import (
	"bytes"
	"crypto/x509"
	"slices"
	"testing"
	"time"
)

func TestBundleDedupeAndOrder(t *testing.T) {
	old, mid, young := mustCA(t, "etcd", t0), mustCA(t, "etcd", t0.Add(time.Hour)), mustCA(t, "etcd", t0.Add(2*time.Hour))
	want := []*x509.Certificate{old.Cert, mid.Cert, young.Cert}
	for _, tt := range []struct {
		name string
		in   []*x509.Certificate
	}{
		{"already ordered", []*x509.Certificate{old.Cert, mid.Cert, young.Cert}},
		{"reversed", []*x509.Certificate{young.Cert, mid.Cert, old.Cert}},
		{"duplicates and nils", []*x509.Certificate{mid.Cert, nil, young.Cert, old.Cert, mid.Cert, young.Cert}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Bundle(tt.in...)
			if !slices.EqualFunc(got, want, (*x509.Certificate).Equal) {
				t.Fatalf("order %v", subjects(got))
			}
			if !bytes.Equal(BundlePEM(tt.in...), BundlePEM(want...)) {
				t.Error("same CAs, different bytes: a no-op rewrite would look like a trust change")
			}
		})
	}
	// Equal NotBefore: ordered by fingerprint, still independent of input order.
	twinA, twinB := mustCA(t, "etcd", t0), mustCA(t, "etcd", t0)
	if !bytes.Equal(BundlePEM(twinA.Cert, twinB.Cert), BundlePEM(twinB.Cert, twinA.Cert)) {
		t.Error("tie order depends on input order")
	}
}

func TestMergeAndParseBundle(t *testing.T) {
	a, b := mustCA(t, "etcd", t0), mustCA(t, "etcd", t0.Add(time.Minute))
	merged, err := MergeBundlePEM(BundlePEM(b.Cert, a.Cert), a.CertPEM(), b.CertPEM())
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseBundle(merged)
	if err != nil || len(got) != 2 || !got[0].Equal(a.Cert) || !got[1].Equal(b.Cert) {
		t.Fatalf("merged %v, %v", subjects(got), err)
	}
	leaf := mustLeaf(t)(a.IssueClient("x", t0, 0))
	if _, err := MergeBundlePEM(a.CertPEM(), EncodeCertPEM(leaf.Cert)); ReasonOf(err) != NotCA {
		t.Errorf("a leaf in a bundle: %v, want NotCA", err)
	}
	if _, err := ParseBundle([]byte("garbage")); ReasonOf(err) != Malformed {
		t.Errorf("garbage bundle: %v, want Malformed", err)
	}
}

func TestContains(t *testing.T) {
	a, b, c := mustCA(t, "etcd", t0), mustCA(t, "etcd", t0), mustCA(t, "etcd", t0)
	bundle := Bundle(a.Cert, b.Cert)
	for _, tt := range []struct {
		ca   *x509.Certificate
		want bool
	}{{a.Cert, true}, {b.Cert, true}, {c.Cert, false}} {
		if Contains(bundle, tt.ca) != tt.want || ContainsKeyID(bundle, tt.ca.SubjectKeyId) != tt.want {
			t.Errorf("%s: Contains/ContainsKeyID disagree with %v", tt.ca.Subject.CommonName, tt.want)
		}
	}
	// The same key re-issued: same SKID, different certificate. Fingerprints tell them apart.
	reissued := craft(t, &x509.Certificate{IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		SubjectKeyId: a.Cert.SubjectKeyId, NotBefore: t0, NotAfter: t0.Add(time.Hour)}, a.Key, nil)
	if Contains(bundle, reissued) || !ContainsKeyID(bundle, reissued.SubjectKeyId) {
		t.Error("re-issued CA: want fingerprint miss and key-id hit")
	}
	if ContainsKeyID(bundle, nil) {
		t.Error("an empty key id matched")
	}
	fps := Fingerprints([]*x509.Certificate{b.Cert, a.Cert, b.Cert})
	if len(fps) != 2 || !slices.IsSorted(fps) || !slices.Contains(fps, Fingerprint(a.Cert)) || len(fps[0]) != 64 {
		t.Errorf("Fingerprints = %v", fps)
	}
}

func subjects(cs []*x509.Certificate) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.NotBefore.String()+" "+Fingerprint(c)[:8])
	}
	return out
}
