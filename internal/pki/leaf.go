package pki

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net"
	"time"

	"github.com/etcd-steward/steward/internal/resources"
)

// DefaultClusterDomain is the Kubernetes DNS suffix when the operator is not told otherwise.
const DefaultClusterDomain = "cluster.local"

// Usage is what a leaf is for; it fixes the extended key usages, which etcd's TLS enforces.
type Usage string

const (
	// Server: a member's client-plane certificate. ClientAuth too, because etcd presents its
	// server certificate as a client when it proxies (grpc-gateway, gateway/grpc-proxy).
	Server Usage = "Server"
	// Peer: a member's peer-plane certificate; a member both serves and dials its peers.
	Peer Usage = "Peer"
	// Client: the operator's or an application's client certificate. ClientAuth only, so a
	// leaked client key cannot impersonate a member.
	Client Usage = "Client"
)

// ExtKeyUsages are the extended key usages a leaf of this usage carries and must carry.
func (u Usage) ExtKeyUsages() []x509.ExtKeyUsage {
	if u == Client {
		return []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	return []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
}

// MemberNames identifies a member for its SANs. ClusterDomain "" means DefaultClusterDomain.
type MemberNames struct {
	Cluster, Namespace, Member, ClusterDomain string
}

func (n MemberNames) domain() string {
	if n.ClusterDomain == "" {
		return DefaultClusterDomain
	}
	return n.ClusterDomain
}

// serviceForms are the names a Pod's resolver accepts for a name in namespace ns: short (same
// namespace, through the search path), namespaced, .svc and fully qualified.
func serviceForms(name, ns, domain string) []string {
	return []string{name, name + "." + ns, name + "." + ns + ".svc", name + "." + ns + ".svc." + domain}
}

// MemberDNSNames are the member's own names: its hostname and its names through the headless
// Service. etcd checks a peer's certificate against the host of that peer's URL
// (resources.PeerURL uses the .svc form), and the other forms cover tools run inside the Pod.
func MemberDNSNames(n MemberNames) []string {
	svc := resources.PeerServiceName(n.Cluster)
	return append([]string{n.Member}, serviceForms(n.Member+"."+svc, n.Namespace, n.domain())...)
}

// SANs are the subject alternative names of a member's server (client-plane) certificate: the
// member's own names, the headless and client Service names (applications dial the client
// Service; the operator may dial a member by its own name), and loopback for etcdctl in the Pod.
func SANs(cluster, namespace, member, clusterDomain string) (dns []string, ips []net.IP) {
	n := MemberNames{Cluster: cluster, Namespace: namespace, Member: member, ClusterDomain: clusterDomain}
	dns = MemberDNSNames(n)
	dns = append(dns, serviceForms(resources.ClientServiceName(cluster), namespace, n.domain())...)
	dns = append(dns, serviceForms(resources.PeerServiceName(cluster), namespace, n.domain())...)
	dns = append(dns, "localhost")
	return dns, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
}

// Leaf is an issued certificate with its private key.
type Leaf struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// Chain are intermediates presented after Cert (tls.crt holds them in order): during a CA
	// rotation, the new CA cross-signed by the old, so clients that trust only the old CA verify.
	Chain []*x509.Certificate
}

// Material is what goes into a Secret: tls.crt (the leaf, then its chain), tls.key and ca.crt
// (the trust bundle, which may hold more than the issuing CA during a rotation).
func (l *Leaf) Material(trust ...*x509.Certificate) (Material, error) {
	key, err := EncodeKeyPEM(l.Key)
	if err != nil {
		return Material{}, err
	}
	return Material{Cert: EncodeCertPEM(append([]*x509.Certificate{l.Cert}, l.Chain...)...), Key: key, CA: BundlePEM(trust...)}, nil
}

// WithChain is a copy of the leaf presenting chain after it.
func (l *Leaf) WithChain(chain ...*x509.Certificate) *Leaf {
	return &Leaf{Cert: l.Cert, Key: l.Key, Chain: chain}
}

// IssueServer issues a member's client-plane certificate with SANs(...).
func (ca *CA) IssueServer(n MemberNames, now time.Time, lifetime time.Duration) (*Leaf, error) {
	dns, ips := SANs(n.Cluster, n.Namespace, n.Member, n.ClusterDomain)
	return ca.issue(n.Member, Server, dns, ips, now, lifetime)
}

// PeerIdentity is the name every member's peer certificate carries besides its own names (the
// headless Service's): etcd's --peer-cert-allowed-hostname admits peers by it, so a client
// certificate of the same CA, which names no host, cannot pass the peer port.
func PeerIdentity(cluster, namespace string) string {
	return resources.PeerServiceName(cluster) + "." + namespace + ".svc"
}

// PeerDNSNames are a member's peer-certificate names: its own and PeerIdentity.
func PeerDNSNames(n MemberNames) []string {
	return append(MemberDNSNames(n), PeerIdentity(n.Cluster, n.Namespace))
}

// IssuePeer issues a member's peer-plane certificate, naming the member and PeerIdentity: peers
// have no reason to reach a member through the client Service.
func (ca *CA) IssuePeer(n MemberNames, now time.Time, lifetime time.Duration) (*Leaf, error) {
	return ca.issue(n.Member, Peer, PeerDNSNames(n), nil, now, lifetime)
}

// IssueClient issues a client certificate; etcd's RBAC (when auth is on) maps CommonName to a user.
func (ca *CA) IssueClient(commonName string, now time.Time, lifetime time.Duration) (*Leaf, error) {
	return ca.issue(commonName, Client, nil, nil, now, lifetime)
}

// Issue issues a leaf with the given DNS names, for certificates that name no single member (a
// user's wildcard certificate in tests and tools).
func (ca *CA) Issue(cn string, u Usage, dns []string, now time.Time, lifetime time.Duration) (*Leaf, error) {
	return ca.issue(cn, u, dns, nil, now, lifetime)
}

// IssueLoopback issues a server certificate for 127.0.0.1 only: a process serving on loopback for
// the one that started it (a restore drill's throwaway member).
func (ca *CA) IssueLoopback(cn string, now time.Time, lifetime time.Duration) (*Leaf, error) {
	return ca.issue(cn, Server, nil, []net.IP{net.IPv4(127, 0, 0, 1)}, now, lifetime)
}

func (ca *CA) issue(cn string, u Usage, dns []string, ips []net.IP, now time.Time, lifetime time.Duration) (*Leaf, error) {
	if cn == "" {
		return nil, errors.New("pki: a certificate needs a name")
	}
	if lifetime <= 0 {
		lifetime = DefaultLeafLifetime
	}
	// A leaf never outlives its CA: past the CA's NotAfter no chain verifies, so a longer leaf
	// would only hide the real deadline from RenewalDue.
	notAfter, ok := ca.end(now, lifetime)
	if !ok {
		return nil, errors.New("pki: the CA has expired; rotate it before issuing")
	}
	key, serial, err := newKeyAndSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"etcd.steward.dev"}},
		NotBefore:             now.Add(-Backdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           u.ExtKeyUsages(),
		BasicConstraintsValid: true,
		DNSNames:              dns,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Leaf{Cert: cert, Key: key}, nil
}

// end is now+lifetime cut at the CA's own NotAfter: nothing the CA signs is current after it.
// ok is false when that leaves no time at all (the CA has expired).
func (ca *CA) end(now time.Time, lifetime time.Duration) (time.Time, bool) {
	end := now.Add(lifetime)
	if end.After(ca.Cert.NotAfter) {
		end = ca.Cert.NotAfter
	}
	return end, end.After(now)
}
