package pki

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"
)

// Reason classifies why material was refused, so a condition can say what to fix.
type Reason string

const (
	Malformed      Reason = "Malformed"      // not PEM, not a certificate or key
	KeyMismatch    Reason = "KeyMismatch"    // tls.key does not belong to tls.crt
	MissingSAN     Reason = "MissingSAN"     // a name etcd or its clients will dial is absent
	Expired        Reason = "Expired"        // past NotAfter
	NotYetValid    Reason = "NotYetValid"    // before NotBefore
	WrongUsage     Reason = "WrongUsage"     // the extended key usage forbids the role
	UntrustedChain Reason = "UntrustedChain" // tls.crt does not chain to ca.crt
	NotCA          Reason = "NotCA"          // ca.crt holds something that cannot sign
)

// Invalid is a refusal: which Secret key is at fault and why, in words a user can act on. The
// controller turns it into a condition and disrupts nothing (fail closed).
type Invalid struct {
	Reason Reason
	Key    string // tls.crt, tls.key, ca.crt or ca.key
	Detail string
}

func (e *Invalid) Error() string {
	return fmt.Sprintf("%s: %s: %s", e.Key, e.Reason, e.Detail)
}

func invalid(r Reason, key, detail string) *Invalid {
	return &Invalid{Reason: r, Key: key, Detail: detail}
}

// ReasonOf is the Reason of an *Invalid anywhere in err's chain, or "" for any other error.
func ReasonOf(err error) Reason {
	var inv *Invalid
	if errors.As(err, &inv) {
		return inv.Reason
	}
	return ""
}

// Material is the raw content of a TLS Secret. Cert may hold the leaf followed by intermediates.
type Material struct {
	Cert, Key, CA []byte
}

// Expect is what the material is about to be used for.
type Expect struct {
	Usage Usage
	// DNSNames and IPs must all be covered by the leaf (wildcards count, as in a handshake).
	DNSNames []string
	IPs      []net.IP
}

// ExpectMember is the expectation for a member's server or peer certificate: exactly the names
// Steward itself would issue, so user material works wherever operator material would.
func ExpectMember(u Usage, n MemberNames) Expect {
	if u == Peer {
		return Expect{Usage: Peer, DNSNames: PeerDNSNames(n)}
	}
	dns, ips := SANs(n.Cluster, n.Namespace, n.Member, n.ClusterDomain)
	return Expect{Usage: Server, DNSNames: dns, IPs: ips}
}

// Validate checks material before anything is rolled onto it. Checks run from the cheapest and
// most specific to the chain, so the reason reported is the most useful one: a wrong key is called
// KeyMismatch, not a failed handshake. It returns nil or an *Invalid.
func Validate(m Material, exp Expect, now time.Time) error {
	roots, err := ParseCertsPEM(m.CA)
	if err != nil {
		return invalid(Malformed, KeyCA, err.Error())
	}
	for _, r := range roots {
		if err := checkIsCA(r); err != nil {
			return err
		}
	}
	chain, err := ParseCertsPEM(m.Cert)
	if err != nil {
		return invalid(Malformed, KeyCert, err.Error())
	}
	leaf := chain[0]
	key, err := ParseKeyPEM(m.Key)
	if err != nil {
		return invalid(Malformed, KeyKey, err.Error())
	}
	if !publicKeysEqual(leaf.PublicKey, key.Public()) {
		return invalid(KeyMismatch, KeyKey, "the private key does not belong to the certificate "+describe(leaf))
	}
	if now.Before(leaf.NotBefore) {
		return invalid(NotYetValid, KeyCert, fmt.Sprintf("%s is valid from %s (now %s)", describe(leaf), leaf.NotBefore.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339)))
	}
	if now.After(leaf.NotAfter) {
		return invalid(Expired, KeyCert, fmt.Sprintf("%s expired at %s", describe(leaf), leaf.NotAfter.UTC().Format(time.RFC3339)))
	}
	for _, want := range exp.Usage.ExtKeyUsages() {
		if !hasUsage(leaf, want) {
			return invalid(WrongUsage, KeyCert, fmt.Sprintf("%s lacks extended key usage %s needed for a %s certificate", describe(leaf), usageName(want), exp.Usage))
		}
	}
	for _, name := range exp.DNSNames {
		if err := leaf.VerifyHostname(name); err != nil {
			return invalid(MissingSAN, KeyCert, fmt.Sprintf("%s does not cover %q (has %s)", describe(leaf), name, strings.Join(leaf.DNSNames, ",")))
		}
	}
	for _, ip := range exp.IPs {
		if !slices.ContainsFunc(leaf.IPAddresses, ip.Equal) {
			return invalid(MissingSAN, KeyCert, fmt.Sprintf("%s does not cover IP %s", describe(leaf), ip))
		}
	}
	return verifyChain(leaf, chain[1:], roots, exp.Usage, now)
}

// verifyChain runs x509's own path building once per required usage, since Go accepts a chain
// when any one of the requested usages fits and Steward needs all of them.
func verifyChain(leaf *x509.Certificate, intermediates, roots []*x509.Certificate, u Usage, now time.Time) error {
	opts := x509.VerifyOptions{Roots: Pool(roots), Intermediates: Pool(intermediates), CurrentTime: now}
	for _, eku := range u.ExtKeyUsages() {
		opts.KeyUsages = []x509.ExtKeyUsage{eku}
		if _, err := leaf.Verify(opts); err != nil {
			var ci x509.CertificateInvalidError
			switch {
			case errors.As(err, &ci) && ci.Reason == x509.Expired:
				// x509 reports both ends of the validity window as Expired; name the right one.
				if !slices.ContainsFunc(roots, func(r *x509.Certificate) bool { return !now.Before(r.NotBefore) }) {
					return invalid(NotYetValid, KeyCA, "no CA in ca.crt is valid yet: "+err.Error())
				}
				return invalid(Expired, KeyCA, "the chain is outside its validity: "+err.Error())
			case errors.As(err, &ci) && ci.Reason == x509.IncompatibleUsage:
				// The leaf has the usage, but an intermediate restricts it away.
				return invalid(WrongUsage, KeyCert, err.Error())
			}
			return invalid(UntrustedChain, KeyCA, fmt.Sprintf("%s is not signed by any CA in ca.crt (%s): %v", describe(leaf), describeAll(roots), err))
		}
	}
	return nil
}

func checkIsCA(c *x509.Certificate) error {
	if !c.BasicConstraintsValid || !c.IsCA {
		return invalid(NotCA, KeyCA, describe(c)+" is not a CA certificate (basic constraints CA:FALSE or missing)")
	}
	if c.KeyUsage != 0 && c.KeyUsage&x509.KeyUsageCertSign == 0 {
		return invalid(NotCA, KeyCA, describe(c)+" may not sign certificates (key usage lacks certSign)")
	}
	return nil
}

// hasUsage follows Go's (and so etcd's) rule: no extended key usage at all, or "any", permits all.
func hasUsage(c *x509.Certificate, want x509.ExtKeyUsage) bool {
	return len(c.ExtKeyUsage) == 0 || slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageAny) || slices.Contains(c.ExtKeyUsage, want)
}

func usageName(u x509.ExtKeyUsage) string {
	switch u {
	case x509.ExtKeyUsageServerAuth:
		return "serverAuth"
	case x509.ExtKeyUsageClientAuth:
		return "clientAuth"
	}
	return fmt.Sprint(int(u))
}

func describe(c *x509.Certificate) string {
	return fmt.Sprintf("%q (serial %x)", c.Subject.CommonName, c.SerialNumber)
}

func describeAll(cs []*x509.Certificate) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = describe(c)
	}
	return strings.Join(names, ", ")
}
