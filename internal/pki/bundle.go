package pki

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"slices"
	"strings"
)

// Fingerprint identifies a certificate exactly: the SHA-256 of its DER, hex, as `openssl x509
// -fingerprint -sha256` prints it (without colons). Rotation bookkeeping uses it rather than the
// SubjectKeyId, because a CA re-issued with the same key shares the SKID but not its validity.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// Bundle returns the CAs without duplicates in a canonical order: oldest NotBefore first, ties by
// fingerprint. The order does not depend on the order the caller passed them in, so rewriting a
// bundle with the same CAs yields the same bytes and never looks like a trust change (which would
// cost a rolling restart).
func Bundle(cas ...*x509.Certificate) []*x509.Certificate {
	seen := map[string]bool{}
	var out []*x509.Certificate
	for _, c := range cas {
		if c == nil {
			continue
		}
		if fp := Fingerprint(c); !seen[fp] {
			seen[fp] = true
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *x509.Certificate) int {
		if c := a.NotBefore.Compare(b.NotBefore); c != 0 {
			return c
		}
		return strings.Compare(Fingerprint(a), Fingerprint(b))
	})
	return out
}

// BundlePEM is Bundle encoded for ca.crt.
func BundlePEM(cas ...*x509.Certificate) []byte { return EncodeCertPEM(Bundle(cas...)...) }

// MergeBundlePEM parses PEM bundles and merges them through Bundle.
func MergeBundlePEM(bundles ...[]byte) ([]byte, error) {
	var all []*x509.Certificate
	for _, b := range bundles {
		cs, err := ParseBundle(b)
		if err != nil {
			return nil, err
		}
		all = append(all, cs...)
	}
	return BundlePEM(all...), nil
}

// ParseBundle parses a ca.crt, refusing anything that is not a CA: a leaf in a trust bundle is
// almost always a copy-paste mistake and would trust only itself.
func ParseBundle(data []byte) ([]*x509.Certificate, error) {
	cs, err := ParseCertsPEM(data)
	if err != nil {
		return nil, invalid(Malformed, KeyCA, err.Error())
	}
	for _, c := range cs {
		if err := checkIsCA(c); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

// Fingerprints of the bundle's certificates, sorted: the set the controller records as what a
// member was started with.
func Fingerprints(cas []*x509.Certificate) []string {
	out := make([]string, 0, len(cas))
	for _, c := range cas {
		out = append(out, Fingerprint(c))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Contains reports whether the bundle holds exactly this CA certificate.
func Contains(bundle []*x509.Certificate, ca *x509.Certificate) bool {
	fp := Fingerprint(ca)
	return slices.ContainsFunc(bundle, func(c *x509.Certificate) bool { return Fingerprint(c) == fp })
}

// ContainsKeyID reports whether the bundle holds a CA with this SubjectKeyId: enough to verify
// leaves that carry it as AuthorityKeyId, though not proof of the same certificate.
func ContainsKeyID(bundle []*x509.Certificate, skid []byte) bool {
	return len(skid) > 0 && slices.ContainsFunc(bundle, func(c *x509.Certificate) bool { return string(c.SubjectKeyId) == string(skid) })
}

// Pool is a CertPool of the certificates (nil entries skipped).
func Pool(certs []*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		if c != nil {
			p.AddCert(c)
		}
	}
	return p
}
