package pki

import (
	"crypto/x509"
	"slices"
	"strings"
	"time"
)

// DefaultRenewFraction renews a certificate once two thirds of its lifetime have passed: a third
// of the lifetime (30 days of a 90-day leaf) is left to notice and fix a renewal that fails.
const DefaultRenewFraction = 2.0 / 3.0

func fractionOrDefault(f float64) float64 {
	// 0 means "default"; 1 or more would renew at or after expiry, which is an outage, so it is
	// treated as a mistake rather than obeyed.
	if f <= 0 || f >= 1 {
		return DefaultRenewFraction
	}
	return f
}

// RenewAt is the instant from which the certificate is due for renewal: NotBefore plus fraction of
// its lifetime. The lifetime is read from the certificate, so user-provided and operator-issued
// certificates of any length are handled alike.
func RenewAt(c *x509.Certificate, fraction float64) time.Time {
	life := c.NotAfter.Sub(c.NotBefore)
	return c.NotBefore.Add(time.Duration(float64(life) * fractionOrDefault(fraction)))
}

// RenewalDue reports whether now is at or past RenewAt.
func RenewalDue(c *x509.Certificate, now time.Time, fraction float64) bool {
	return !now.Before(RenewAt(c, fraction))
}

// NextCheck is when the controller should look again: the earliest RenewAt among certs, or now if
// one is already due (renew it now). ok is false with no certificates (nothing to requeue for).
func NextCheck(certs []*x509.Certificate, now time.Time, fraction float64) (at time.Time, ok bool) {
	for _, c := range certs {
		r := RenewAt(c, fraction)
		if !ok || r.Before(at) {
			at, ok = r, true
		}
	}
	if ok && at.Before(now) {
		at = now
	}
	return at, ok
}

// RequeueAfter is NextCheck as a duration for a reconcile result; zero means "act now" or, with
// no certificates, "no timed requeue needed".
func RequeueAfter(certs []*x509.Certificate, now time.Time, fraction float64) time.Duration {
	at, ok := NextCheck(certs, now, fraction)
	if !ok {
		return 0
	}
	return at.Sub(now)
}

// Expiry is one certificate's line in status: what it is, when it expires, when Steward renews it.
type Expiry struct {
	Name     string // e.g. "etcd-0/peer", "client", "ca"
	Subject  string
	NotAfter time.Time
	RenewAt  time.Time
	// Due is true when RenewAt has passed; Expired when NotAfter has.
	Due, Expired bool
}

// Summarize reports every named certificate, soonest expiry first (ties by name, so status does
// not churn), which is the order a user reading status cares about.
func Summarize(named map[string]*x509.Certificate, now time.Time, fraction float64) []Expiry {
	out := make([]Expiry, 0, len(named))
	for name, c := range named {
		out = append(out, Expiry{
			Name:     name,
			Subject:  c.Subject.CommonName,
			NotAfter: c.NotAfter,
			RenewAt:  RenewAt(c, fraction),
			Due:      RenewalDue(c, now, fraction),
			Expired:  now.After(c.NotAfter),
		})
	}
	slices.SortFunc(out, func(a, b Expiry) int {
		if c := a.NotAfter.Compare(b.NotAfter); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}
