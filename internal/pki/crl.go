package pki

import (
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"
)

// DefaultCRLLifetime is how long a revocation list is declared current when the caller does not
// say. etcd does not read NextUpdate (it only looks up serials), so this matters to other readers
// of the list (openssl crl, a proxy verifying clients with it); a list is reissued whenever a
// revocation is added anyway.
const DefaultCRLLifetime = 30 * 24 * time.Hour

// RevokedSerial is one revoked certificate: its serial number and when it was revoked (zero means
// the list's issue time).
type RevokedSerial struct {
	Serial    *big.Int
	RevokedAt time.Time
}

// RevocationList returns a DER-encoded X.509 v2 CRL (DER, never PEM: see resources.KeyCRL for
// what etcd does with the file) signed by the CA that revokes the given
// serials. number is the CRL number (RFC 5280 5.2.3): it must grow with every list the CA issues
// so a reader can tell the newer of two lists; the caller keeps it (a counter in status, or the
// issue time in seconds). An empty revoked list gives a valid, empty CRL: what etcd should be
// started with before anything is revoked, since a missing or unreadable --client-crl-file
// refuses every client. lifetime <= 0 means DefaultCRLLifetime; the list never claims to be
// current past the CA's own end.
//
// Duplicate serials are listed once (the earliest revocation); entries are sorted by serial, so
// the same revocations give the same list content, whatever order they come in.
func (ca *CA) RevocationList(revoked []RevokedSerial, number int64, now time.Time, lifetime time.Duration) ([]byte, error) {
	if number < 0 {
		return nil, fmt.Errorf("pki: CRL number %d is negative", number)
	}
	if lifetime <= 0 {
		lifetime = DefaultCRLLifetime
	}
	next, ok := ca.end(now, lifetime)
	if !ok {
		return nil, errors.New("pki: the CA has expired; a revocation list it signs would be current for no time at all")
	}
	entries, err := revocationEntries(revoked, now)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.RevocationList{
		Number: big.NewInt(number),
		// Backdated like the leaves, for a reader whose clock is a little behind.
		ThisUpdate:                now.Add(-Backdate),
		NextUpdate:                next,
		RevokedCertificateEntries: entries,
	}
	// x509 takes the AuthorityKeyId from the CA's SubjectKeyId and checks the CA may sign CRLs
	// (NewCA's CAs do; a brought-along CA without the key usage is refused here, with x509's reason).
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, ca.Cert, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("pki: signing the revocation list: %w", err)
	}
	return der, nil
}

func revocationEntries(revoked []RevokedSerial, now time.Time) ([]x509.RevocationListEntry, error) {
	bySerial := map[string]x509.RevocationListEntry{}
	for i, r := range revoked {
		if r.Serial == nil || r.Serial.Sign() < 0 {
			return nil, fmt.Errorf("pki: revoked entry %d has no valid serial", i)
		}
		at := r.RevokedAt
		if at.IsZero() {
			at = now
		}
		k := r.Serial.Text(16)
		if e, ok := bySerial[k]; ok && !at.Before(e.RevocationTime) {
			continue
		}
		bySerial[k] = x509.RevocationListEntry{SerialNumber: new(big.Int).Set(r.Serial), RevocationTime: at.UTC()}
	}
	entries := make([]x509.RevocationListEntry, 0, len(bySerial))
	for _, e := range bySerial {
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b x509.RevocationListEntry) int {
		return a.SerialNumber.Cmp(b.SerialNumber)
	})
	return entries, nil
}
