package tlsplan

import (
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcd-steward/steward/internal/pki"
)

// secretAfter is the member's Secret as it will be once this reconcile's writes land.
func (d *Decision) secretAfter(m Member) *MemberSecret {
	for i := range d.WriteMembers {
		if d.WriteMembers[i].Name == m.Name {
			return &d.WriteMembers[i].Secret
		}
	}
	return m.Secret
}

// unserved are the members whose running etcd presents another leaf than their Secret holds: the
// kubelet has not refreshed the volume yet, or the write is this reconcile's. A member that did
// not answer is not listed; it will present its Secret's leaf when it is back.
func (d *Decision) unserved(f *Facts) []string {
	var out []string
	for _, m := range f.Members {
		s := d.secretAfter(m)
		if m.Pod == nil || m.Pod.Served == nil || s == nil {
			continue
		}
		if pki.Fingerprint(m.Pod.Served) != pki.Fingerprint(s.Server.Cert) {
			out = append(out, m.Name)
		}
	}
	return out
}

// markOutdated hands the members a pass restarts to the rollout engine. DropOldCA restarts only
// once every member is seen serving its new-signed leaf: a member that stopped trusting the old CA
// must never meet a peer still presenting an old-signed one.
func (d *Decision) markOutdated(f *Facts, rot pki.RotationPlan) {
	unserved := d.unserved(f)
	switch {
	case rot.Pass == pki.DropOldCA && len(unserved) > 0:
		d.Pending = fmt.Sprintf("CA rotation: waiting for %s to serve the new-signed certificate before the old CA is dropped",
			strings.Join(unserved, ", "))
		return
	case rot.Restart:
		for _, name := range rot.Pending {
			d.TrustOutdated[name] = true
		}
		if len(rot.Pending) > 0 {
			d.Pending = fmt.Sprintf("CA rotation pass %s: %s still to restart", rot.Pass, strings.Join(rot.Pending, ", "))
		}
		return
	case rot.Pass == pki.SwapLeaves:
		d.Pending = fmt.Sprintf("CA rotation pass SwapLeaves: waiting for %s to serve the new-signed certificate",
			strings.Join(union(unserved, rot.Pending, rot.PendingClients), ", "))
		return
	}
	if len(unserved) > 0 {
		d.Pending = "waiting for " + strings.Join(unserved, ", ") + " to serve the renewed certificate"
	}
}

// status lists the expiries, warns of one that is near and not renewed, and says when to look next.
func (d *Decision) status(f *Facts) {
	var tracked []*pki.Leaf
	add := func(name string, l *pki.Leaf, served bool) {
		if l == nil {
			return
		}
		c := Certificate{Name: name, NotAfter: l.Cert.NotAfter, Served: served}
		if f.User == nil { // the user renews their own certificates, not Steward
			c.RenewAt = pki.RenewAt(l.Cert, f.RenewFraction)
			tracked = append(tracked, l)
		}
		d.Certificates = append(d.Certificates, c)
	}
	if f.CA != nil {
		add("ca", &pki.Leaf{Cert: f.CA.Cert}, false)
	}
	if f.NextCA != nil {
		add("ca-next", &pki.Leaf{Cert: f.NextCA.Cert}, false)
	}
	for _, m := range f.Members {
		s := d.secretAfter(m)
		if s == nil {
			continue
		}
		served := m.Pod != nil && m.Pod.Served != nil && pki.Fingerprint(m.Pod.Served) == pki.Fingerprint(s.Server.Cert)
		add(m.Name+"/server", s.Server, served)
		servedPeer := served
		if f.User != nil { // the user's planes change apart: the peer port tells for the peer leaf
			servedPeer = m.Pod != nil && m.Pod.ServedPeer != nil && pki.Fingerprint(m.Pod.ServedPeer) == pki.Fingerprint(s.Peer.Cert)
		}
		add(m.Name+"/peer", s.Peer, servedPeer)
		if m.Pod != nil && m.Pod.Served != nil && nearExpiry(m.Pod.Served, f.Now) && !served {
			d.Expiring = fmt.Sprintf("%s serves a certificate that expires at %s and has not picked up its renewal yet",
				m.Name, m.Pod.Served.NotAfter.UTC().Format(time.RFC3339))
		}
	}
	if d.WriteAppClient != nil {
		add("client", d.WriteAppClient.Leaf, false)
	} else if f.AppClient != nil {
		add("client", f.AppClient.Leaf, false)
	}
	if f.CA != nil && nearExpiry(f.CA.Cert, f.Now) && f.NextCA == nil {
		d.Expiring = "the cluster CA expires at " + f.CA.Cert.NotAfter.UTC().Format(time.RFC3339) + " and no rotation is under way"
	}
	certs := make([]*x509.Certificate, 0, len(tracked))
	for _, l := range tracked {
		certs = append(certs, l.Cert)
	}
	d.RequeueAfter = pki.RequeueAfter(certs, f.Now, f.RenewFraction)
}

// nearExpiry: less than a tenth of the certificate's lifetime is left.
func nearExpiry(c *x509.Certificate, now time.Time) bool {
	life := c.NotAfter.Sub(c.NotBefore)
	return c.NotAfter.Sub(now) < life/10
}

func union(lists ...[]string) []string {
	out := slices.Concat(lists...)
	slices.Sort(out)
	return slices.Compact(out)
}
