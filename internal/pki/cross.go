package pki

import (
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
)

// CrossSign issues next's certificate again, signed by ca: same subject, same key, same
// SubjectKeyId, so a leaf next signed chains through it to ca. Members serve it after their
// new-signed leaves while the rotation still trusts the old CA, so a client that loaded only the
// old ca.crt (a kube-apiserver reads --etcd-cafile once, at start) keeps verifying them, while
// clients that trust next find it as a root and never need the intermediate.
func (ca *CA) CrossSign(next *x509.Certificate) (*x509.Certificate, error) {
	if next == nil || !next.IsCA {
		return nil, errors.New("pki: only a CA certificate can be cross-signed")
	}
	notAfter := next.NotAfter
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter // nothing verifies past the signer's end anyway
	}
	_, serial, err := newKeyAndSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		// The exact subject bytes: path building matches a leaf's issuer to them.
		RawSubject:            next.RawSubject,
		SubjectKeyId:          next.SubjectKeyId,
		NotBefore:             next.NotBefore,
		NotAfter:              notAfter,
		KeyUsage:              next.KeyUsage,
		BasicConstraintsValid: true,
		IsCA:                  true,
		// It signs leaves only.
		MaxPathLenZero: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, next.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("pki: cross-signing the next CA: %w", err)
	}
	return x509.ParseCertificate(der)
}

// IsCrossSigned reports whether c is next cross-signed by old: next's subject and key, old's
// signature. Any such certificate serves; they differ only in serial and signature.
func IsCrossSigned(c, old, next *x509.Certificate) bool {
	return c != nil && old != nil && next != nil && string(c.RawSubject) == string(next.RawSubject) &&
		publicKeysEqual(c.PublicKey, next.PublicKey) && c.CheckSignatureFrom(old) == nil && c.IsCA
}

// AdmitsCrossSigned reports whether a client trusting only ca can verify a chain through a
// certificate ca cross-signed: CAs Steward created before cross-signing have path length 0, and
// Go and OpenSSL refuse any intermediate below them.
func AdmitsCrossSigned(ca *x509.Certificate) bool {
	return ca != nil && !(ca.BasicConstraintsValid && ca.MaxPathLen == 0)
}
