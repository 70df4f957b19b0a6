// Package pki is the pure certificate logic of Steward's TLS support: creating a cluster CA,
// issuing member and client leaves, validating material (operator-issued or user-provided) before
// any member is rolled onto it, deciding when to renew, and planning CA rotation as ordered passes.
//
// Nothing here talks to Kubernetes or reads a clock: the controller passes `now` in, so every
// decision is reproducible in a unit test and a requeue can be computed exactly.
package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// Defaults. A CA outlives many leaf generations so that leaf renewal (no restart) is routine and CA
// rotation (two rolling restarts) is rare.
const (
	DefaultCALifetime   = 5 * 365 * 24 * time.Hour
	DefaultLeafLifetime = 90 * 24 * time.Hour
	// Backdate is subtracted from NotBefore so that a member whose clock is slightly behind the
	// operator's does not refuse a freshly issued certificate as not yet valid.
	Backdate = 5 * time.Minute
)

// Keys of the Secrets that carry TLS material; the same names cert-manager and kubernetes.io/tls
// Secrets use, so bring-your-own Secrets need no translation.
const (
	KeyCert   = "tls.crt"
	KeyKey    = "tls.key"
	KeyCA     = "ca.crt"
	KeyCAKey  = "ca.key" // only in the operator's own CA Secret
	pemCert   = "CERTIFICATE"
	pemPKCS8  = "PRIVATE KEY"
	pemECKey  = "EC PRIVATE KEY"
	pemRSAKey = "RSA PRIVATE KEY"
)

// CA is a certificate authority: its certificate and the key that signs leaves.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// NewCA creates a self-signed ECDSA P-256 CA for a cluster. The subject names the cluster and
// namespace so that an operator reading `openssl x509 -text` knows which cluster it belongs to.
// lifetime <= 0 means DefaultCALifetime.
func NewCA(cluster, namespace string, now time.Time, lifetime time.Duration) (*CA, error) {
	if cluster == "" || namespace == "" {
		return nil, errors.New("pki: a CA needs a cluster and a namespace")
	}
	if lifetime <= 0 {
		lifetime = DefaultCALifetime
	}
	key, serial, err := newKeyAndSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:         fmt.Sprintf("steward-ca %s/%s", namespace, cluster),
			Organization:       []string{"etcd.steward.dev"},
			OrganizationalUnit: []string{namespace + "/" + cluster},
			// A distinct subject per CA: during a rotation a member's handshake lists the CAs it
			// accepts by subject, and clients pick the certificate to present from that list.
			SerialNumber: serial.Text(16),
		},
		NotBefore:             now.Add(-Backdate),
		NotAfter:              now.Add(lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		// One intermediate at most: during a rotation members serve the next CA cross-signed by
		// this one (CrossSign) after their leaves, so clients that trust only this CA still
		// verify them. Go and OpenSSL apply a root's path length too, so 0 would refuse that
		// chain; the cross-signed certificate itself has path length 0.
		MaxPathLen: 1,
	}
	// x509 fills SubjectKeyId for a CA; leaves then carry it as AuthorityKeyId.
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

// LoadCA parses a CA from its Secret (ca.crt, ca.key), refusing a certificate that is not a CA or
// a key that does not belong to it: signing with a mismatched key would mint leaves nothing trusts.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	certs, err := ParseCertsPEM(certPEM)
	if err != nil {
		return nil, invalid(Malformed, KeyCA, err.Error())
	}
	if len(certs) != 1 {
		return nil, invalid(Malformed, KeyCA, fmt.Sprintf("want exactly one CA certificate, found %d", len(certs)))
	}
	key, err := ParseKeyPEM(keyPEM)
	if err != nil {
		return nil, invalid(Malformed, KeyCAKey, err.Error())
	}
	if err := checkIsCA(certs[0]); err != nil {
		return nil, err
	}
	if !publicKeysEqual(certs[0].PublicKey, key.Public()) {
		return nil, invalid(KeyMismatch, KeyCAKey, "the private key does not belong to the CA certificate")
	}
	return &CA{Cert: certs[0], Key: key}, nil
}

// CertPEM is the CA certificate in PEM.
func (ca *CA) CertPEM() []byte { return EncodeCertPEM(ca.Cert) }

// KeyPEM is the CA key in PKCS#8 PEM.
func (ca *CA) KeyPEM() ([]byte, error) { return EncodeKeyPEM(ca.Key) }

// EncodeCertPEM encodes certificates in order, one CERTIFICATE block each.
func EncodeCertPEM(certs ...*x509.Certificate) []byte {
	var out []byte
	for _, c := range certs {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: pemCert, Bytes: c.Raw})...)
	}
	return out
}

// EncodeKeyPEM encodes a private key as PKCS#8, which etcd, Go's tls and openssl all read.
func EncodeKeyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPKCS8, Bytes: der}), nil
}

// ParseCertsPEM parses every CERTIFICATE block. Other block types are skipped (bundles written by
// hand often carry comments or keys), but no certificate at all, or trailing bytes that are not
// PEM, is an error: a silently empty trust pool would fail every handshake later and far away.
func ParseCertsPEM(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := data
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != pemCert {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block found")
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("trailing data after the last PEM block")
	}
	return certs, nil
}

// ParseKeyPEM parses the first private key block: PKCS#8, SEC1 EC or PKCS#1 RSA, so that user
// material from openssl, cfssl or cert-manager is accepted as it comes.
func ParseKeyPEM(data []byte) (crypto.Signer, error) {
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no PEM private key block found")
		}
		switch block.Type {
		case pemPKCS8:
			k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				return nil, err
			}
			s, ok := k.(crypto.Signer)
			if !ok {
				return nil, fmt.Errorf("unsupported private key type %T", k)
			}
			return s, nil
		case pemECKey:
			return x509.ParseECPrivateKey(block.Bytes)
		case pemRSAKey:
			return x509.ParsePKCS1PrivateKey(block.Bytes)
		}
	}
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	switch k := a.(type) {
	case *ecdsa.PublicKey:
		return k.Equal(b)
	case *rsa.PublicKey:
		return k.Equal(b)
	case interface{ Equal(crypto.PublicKey) bool }:
		return k.Equal(b)
	}
	return false
}

// newSerial is a random 128-bit serial: unique without keeping state (RFC 5280 allows 20 octets).
// newKeyAndSerial is what every certificate starts from: a fresh P-256 key and a random 128-bit
// serial (random, so two certificates of one CA never share a serial even across restarts).
func newKeyAndSerial() (*ecdsa.PrivateKey, *big.Int, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, nil, err
	}
	return key, serial, nil
}
