package tlsplan

import (
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcd-steward/steward/internal/pki"
)

// decideUser rolls the user's Secrets onto the members. The user owns the CAs, so Steward issues
// nothing; it copies, and orders the copies so no two parties ever stop trusting each other. For
// each plane, from the live state:
//
//  1. WidenTrust while some member started without trusting every CA of the user's ca.crt: each
//     member's bundle becomes what it holds plus the user's, and those members restart. Leaves stay.
//  2. Then the user's leaf replaces any other (SwapLeaves, no restart; a plain renewal is only this).
//  3. Once every answering member serves it, DropOldCA: bundles become the user's alone and the
//     members that trust more restart.
//
// A leaf is only ever presented to members that trust its CA: old leaves while every member still
// trusts the old CAs (they are only dropped in step 3, after no member presents an old leaf), the
// user's leaf once every member trusts the user's CAs.
func decideUser(f Facts) Decision {
	d := Decision{Pass: pki.Done, TrustOutdated: map[string]bool{}}
	next := map[string]*MemberSecret{}
	for _, m := range f.Members {
		next[m.Name] = seedSecret(f, m)
	}
	var pending, passes []string
	for _, p := range userPlanes(f.User) {
		pass, msg := p.step(f, next, &d)
		if msg != "" {
			pending = append(pending, msg)
		}
		if pass != "" {
			passes = append(passes, string(pass))
		}
	}
	if len(passes) > 0 {
		d.Pass = pki.Pass(passes[0])
	}
	d.Pending = strings.Join(pending, "; ")
	for _, m := range f.Members {
		if !sameSecret(m.Secret, next[m.Name]) {
			d.WriteMembers = append(d.WriteMembers, MemberWrite{Name: m.Name, Secret: *next[m.Name], Why: "user Secret changed"})
		}
	}
	d.Trust = f.User.Peer.Trust
	d.status(&f)
	var expiring []string
	for _, p := range userPlanes(f.User) {
		if c := p.user.Leaf.Cert; pki.RenewalDue(c, f.Now, f.RenewFraction) {
			expiring = append(expiring, fmt.Sprintf("the %s plane's certificate from the user's Secret expires at %s", p.name, c.NotAfter.UTC().Format(time.RFC3339)))
		}
	}
	if len(expiring) > 0 {
		d.Expiring = strings.Join(expiring, "; ") + "; Steward cannot renew it: put a renewed one in the Secret"
	}
	return d
}

// seedSecret is what a member's Secret starts from: its own, or for a new member the material the
// others run with (so it joins on what they trust), or the user's for a new cluster.
func seedSecret(f Facts, m Member) *MemberSecret {
	if m.Secret != nil {
		c := *m.Secret
		c.ClientTrust = m.Secret.ClientBundle() // its own copy: the peer plane may replace Trust first
		return &c
	}
	for _, o := range f.Members {
		if o.Secret != nil {
			return &MemberSecret{Server: o.Secret.Server, Peer: o.Secret.Peer, Trust: o.Secret.Trust, ClientTrust: o.Secret.ClientBundle()}
		}
	}
	u := f.User
	return &MemberSecret{Server: u.Client.Leaf, Peer: u.Peer.Leaf, Trust: u.Peer.Trust, ClientTrust: u.Client.Trust}
}

// plane reaches one plane's fields of the Secret and the Pod.
type plane struct {
	name   string
	user   Material
	leaf   func(*MemberSecret) **pki.Leaf
	trust  func(*MemberSecret) *[]*x509.Certificate
	trusts func(*Pod) []string
	served func(*Pod) *x509.Certificate
}

func userPlanes(u *UserTLS) []plane {
	return []plane{
		{name: "peer", user: u.Peer,
			leaf:   func(s *MemberSecret) **pki.Leaf { return &s.Peer },
			trust:  func(s *MemberSecret) *[]*x509.Certificate { return &s.Trust },
			trusts: func(p *Pod) []string { return p.Trust },
			served: func(p *Pod) *x509.Certificate { return p.ServedPeer }},
		{name: "client", user: u.Client,
			leaf: func(s *MemberSecret) **pki.Leaf { return &s.Server },
			trust: func(s *MemberSecret) *[]*x509.Certificate {
				if s.ClientTrust == nil {
					s.ClientTrust = s.Trust
				}
				return &s.ClientTrust
			},
			trusts: (*Pod).ClientPlaneTrust,
			served: func(p *Pod) *x509.Certificate { return p.Served }},
	}
}

// step moves one plane one pass forward, editing next and marking restarts. On the client plane,
// dropping the old CAs waits for clients that load certificates once (ClientWait), timed from the
// NotBefore of the user's new certificate: Steward does not know when clients got theirs.
func (p plane) step(f Facts, next map[string]*MemberSecret, d *Decision) (pki.Pass, string) {
	outdated := d.TrustOutdated
	want := pki.Fingerprints(p.user.Trust)
	var narrow, unwidened, unserved []string
	for _, m := range f.Members {
		if m.Pod == nil {
			continue
		}
		got := m.Pod.Trust
		if p.name == "client" {
			got = m.Pod.ClientPlaneTrust()
		}
		if !subset(want, got) {
			unwidened = append(unwidened, m.Name)
		}
		if !slices.Equal(got, want) {
			narrow = append(narrow, m.Name)
		}
		if s := p.served(m.Pod); s != nil && pki.Fingerprint(s) != pki.Fingerprint(p.user.Leaf.Cert) {
			unserved = append(unserved, m.Name)
		}
	}
	rotating := len(narrow) > 0
	switch {
	case len(unwidened) > 0:
		for _, s := range next {
			t := p.trust(s)
			*t = pki.Bundle(append(slices.Clone(*t), p.user.Trust...)...)
		}
		for _, n := range unwidened {
			outdated[n] = true
		}
		return pki.WidenTrust, fmt.Sprintf("%s plane: widening trust to the new ca.crt; %s still to restart", p.name, strings.Join(unwidened, ", "))
	case len(unserved) > 0 || anyLeafDiffers(next, p):
		for _, s := range next {
			*p.leaf(s) = p.user.Leaf
		}
		pass := pki.Pass("")
		if rotating {
			pass = pki.SwapLeaves
		}
		if len(unserved) == 0 {
			return pass, p.name + " plane: copying the new certificate from the user's Secret to the members"
		}
		return pass, fmt.Sprintf("%s plane: waiting for %s to serve the new certificate", p.name, strings.Join(unserved, ", "))
	case rotating && p.name == "client" && !dropBegun(f.Members, p.trusts, want) &&
		f.clientWait(p.user.Trust, p.user.Leaf.Cert.NotBefore, nil, "the Secrets you issue them in") != nil:
		d.AwaitingClients = f.clientWait(p.user.Trust, p.user.Leaf.Cert.NotBefore, nil, "the Secrets you issue them in")
		return pki.DropOldCA, "client plane: " + d.AwaitingClients.Message // members keep the wider bundle
	case rotating:
		for _, s := range next {
			*p.trust(s) = p.user.Trust
		}
		for _, n := range narrow {
			outdated[n] = true
		}
		return pki.DropOldCA, fmt.Sprintf("%s plane: dropping the old CA; %s still to restart", p.name, strings.Join(narrow, ", "))
	}
	for _, s := range next {
		*p.trust(s) = p.user.Trust // a Secret wider than its Pod (a crash mid-pass) narrows at no cost
	}
	return "", ""
}

func anyLeafDiffers(next map[string]*MemberSecret, p plane) bool {
	for _, s := range next {
		if l := *p.leaf(s); l == nil || pki.Fingerprint(l.Cert) != pki.Fingerprint(p.user.Leaf.Cert) {
			return true
		}
	}
	return false
}

func subset(small, big []string) bool {
	for _, s := range small {
		if !slices.Contains(big, s) {
			return false
		}
	}
	return true
}

func sameSecret(a, b *MemberSecret) bool {
	if a == nil || b == nil {
		return a == b
	}
	leafEq := func(x, y *pki.Leaf) bool {
		// The chain counts: a user who adds the new CA cross-signed by the old after the leaf
		// wants it served.
		return x != nil && y != nil && pki.Fingerprint(x.Cert) == pki.Fingerprint(y.Cert) && sameChain(x, y.Chain)
	}
	return leafEq(a.Server, b.Server) && leafEq(a.Peer, b.Peer) &&
		slices.Equal(pki.Fingerprints(a.Trust), pki.Fingerprints(b.Trust)) &&
		slices.Equal(pki.Fingerprints(a.ClientBundle()), pki.Fingerprints(b.ClientBundle()))
}
