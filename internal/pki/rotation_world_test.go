package pki

import (
	"crypto/x509"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/resources"
)

// simMember is an etcd process as far as TLS goes: the trust pool it loaded at start (etcd never
// reloads it) and the leaves it presents (etcd re-reads them on every handshake).
type simMember struct {
	names        MemberNames
	trust        []*x509.Certificate
	server, peer *Leaf
}

type simClient struct {
	name   string
	leaf   *Leaf
	bundle []*x509.Certificate // the trust bundle the client has loaded
}

// world is a 3-member cluster with the operator and one application as clients.
type world struct {
	t        *testing.T
	now      time.Time
	old, new *CA
	members  []*simMember
	clients  []*simClient
	// prevClient is the client bundle published one step ago: what a slow application still uses.
	prevClient []*x509.Certificate
}

func newWorld(t *testing.T, n int) *world {
	w := &world{t: t, now: t0, old: mustCA(t, "etcd", t0)}
	for i := range n {
		names := MemberNames{Cluster: "etcd", Namespace: "db", Member: resources.MemberName("etcd", int32(i))}
		w.members = append(w.members, &simMember{names: names, trust: Bundle(w.old.Cert)})
		w.issueMember(w.members[i], w.old)
	}
	for _, name := range []string{"operator", "app"} {
		w.clients = append(w.clients, &simClient{name: name, bundle: Bundle(w.old.Cert),
			leaf: mustLeaf(t)(w.old.IssueClient(name, w.now, 0))})
	}
	return w
}

func (w *world) issueMember(m *simMember, ca *CA) {
	m.server = mustLeaf(w.t)(ca.IssueServer(m.names, w.now, 0))
	m.peer = mustLeaf(w.t)(ca.IssuePeer(m.names, w.now, 0))
}

func (w *world) caByFP(fp string) *CA {
	for _, ca := range []*CA{w.old, w.new} {
		if ca != nil && Fingerprint(ca.Cert) == fp {
			return ca
		}
	}
	w.t.Fatalf("no CA with fingerprint %s", fp)
	return nil
}

// input gathers the facts the controller would: recorded trust and the served leaf's issuer.
func (w *world) input() RotationInput {
	in := RotationInput{Old: w.old.Cert}
	if w.new != nil {
		in.New = w.new.Cert
	}
	for _, m := range w.members {
		issuer := w.issuerOf(m.peer.Cert)
		if s := w.issuerOf(m.server.Cert); s != issuer {
			w.t.Fatalf("%s: server and peer leaves from different CAs", m.names.Member)
		}
		in.Members = append(in.Members, PartyTLS{Name: m.names.Member, Trusts: Fingerprints(m.trust), LeafCA: issuer})
	}
	for _, c := range w.clients {
		in.Clients = append(in.Clients, PartyTLS{Name: c.name, LeafCA: w.issuerOf(c.leaf.Cert)})
	}
	return in
}

func (w *world) issuerOf(c *x509.Certificate) string {
	for _, ca := range []*CA{w.old, w.new} {
		if ca != nil && c.CheckSignatureFrom(ca.Cert) == nil {
			return Fingerprint(ca.Cert)
		}
	}
	return "unknown"
}

// broken lists every handshake that would fail now, as the dialing side and the accepting side
// each verify the other's leaf against their own pool. Ordered pairs cover both directions.
func (w *world) broken() []string {
	var out []string
	fail := func(err error, format string, args ...any) {
		if err != nil {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	for _, a := range w.members {
		hostA := resources.MemberHost(a.names.Cluster, a.names.Namespace, a.names.Member)
		for _, b := range w.members {
			if a == b {
				continue
			}
			// b dials a's peer URL: b checks a as a server, a checks b as a client.
			fail(verifyAs(a.peer.Cert, b.trust, x509.ExtKeyUsageServerAuth, hostA, w.now), "%s rejects peer %s's server cert", b.names.Member, a.names.Member)
			fail(verifyAs(b.peer.Cert, a.trust, x509.ExtKeyUsageClientAuth, "", w.now), "%s rejects peer %s's client cert", a.names.Member, b.names.Member)
		}
		for _, c := range w.clients {
			fail(verifyAs(a.server.Cert, c.bundle, x509.ExtKeyUsageServerAuth, hostA, w.now), "%s rejects %s", c.name, a.names.Member)
			fail(verifyAs(c.leaf.Cert, a.trust, x509.ExtKeyUsageClientAuth, "", w.now), "%s rejects client %s", a.names.Member, c.name)
		}
	}
	return out
}

// step applies the plan the way the controller would, one action at a time: publish the client
// bundle, then one member (highest ordinal first, as the rollout engine orders followers) or one
// client. Restarts load the pass's trust; swaps re-issue leaves from the pass's signer.
func (w *world) step(p RotationPlan, laggingApp bool) string {
	for _, c := range w.clients {
		c.bundle = p.Client
		if laggingApp && c.name == "app" && w.prevClient != nil {
			c.bundle = w.prevClient
		}
	}
	w.prevClient = p.Client
	w.now = w.now.Add(time.Minute)
	switch {
	case len(p.Pending) > 0:
		m := w.member(p.Pending[len(p.Pending)-1])
		if p.Restart {
			m.trust = p.Trust
			return "restart " + m.names.Member
		}
		w.issueMember(m, w.caByFP(Fingerprint(p.Signer)))
		return "swap " + m.names.Member
	case len(p.PendingClients) > 0:
		c := w.client(p.PendingClients[0])
		c.leaf = mustLeaf(w.t)(w.caByFP(Fingerprint(p.Signer)).IssueClient(c.name, w.now, 0))
		return "swap " + c.name
	}
	return ""
}

func (w *world) member(name string) *simMember {
	i := slices.IndexFunc(w.members, func(m *simMember) bool { return m.names.Member == name })
	return w.members[i]
}

func (w *world) client(name string) *simClient {
	i := slices.IndexFunc(w.clients, func(c *simClient) bool { return c.name == name })
	return w.clients[i]
}
