package tlsplan

import (
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/internal/resources"
)

// userLeaf is a certificate as users bring them: one for every member, signed by their own CA,
// covering the members through a wildcard over the headless Service (and, on the client plane,
// the client Service), with the usages pki.Validate demands.
func userLeaf(t *testing.T, ca *pki.CA, u pki.Usage, issued time.Time, life time.Duration) *pki.Leaf {
	t.Helper()
	dns := []string{"*." + resources.PeerServiceName(testCluster) + "." + testNamespace + ".svc"}
	if u == pki.Server {
		dns = append(dns, resources.ClientServiceName(testCluster)+"."+testNamespace+".svc")
	}
	return mustLeaf(t)(ca.Issue("user "+string(u), u, dns, issued, life))
}

// userTLS is the content of the user's two Secrets: a leaf per plane from the plane's CA, issued
// at issued, with ca.crt holding that CA alone.
func userTLS(t *testing.T, peerCA, clientCA *pki.CA, issued time.Time) *UserTLS {
	t.Helper()
	return &UserTLS{
		Peer:   Material{Leaf: userLeaf(t, peerCA, pki.Peer, issued, leafLife), Trust: pki.Bundle(peerCA.Cert)},
		Client: Material{Leaf: userLeaf(t, clientCA, pki.Server, issued, leafLife), Trust: pki.Bundle(clientCA.Cert)},
	}
}

// readBack is a member Secret as the controller reads it back (parseMemberSecret): canonical
// bundles, and no ClientTrust when the planes' bundles are equal.
func readBack(s MemberSecret) MemberSecret {
	out := MemberSecret{Server: s.Server, Peer: s.Peer, Trust: pki.Bundle(s.Trust...)}
	if c := pki.Bundle(s.ClientBundle()...); FormatTrust(c) != FormatTrust(out.Trust) {
		out.ClientTrust = c
	}
	return out
}

// userSecret is a member Secret holding exactly the user's material.
func userSecret(u *UserTLS) *MemberSecret {
	s := readBack(MemberSecret{Server: u.Client.Leaf, Peer: u.Peer.Leaf, Trust: u.Peer.Trust, ClientTrust: u.Client.Trust})
	return &s
}

// podFor is a Pod started on s (its annotation written and read back, as the controller does),
// serving s's leaves on both ports.
func podFor(s *MemberSecret) *Pod {
	peer, client := ParsePlaneTrust(FormatPlaneTrust(s.Trust, s.ClientBundle()))
	return &Pod{Trust: peer, ClientTrust: client, Served: s.Server.Cert, ServedPeer: s.Peer.Cert}
}

func userFacts(now time.Time, u *UserTLS) Facts {
	f := facts(now, nil, nil)
	f.User = u
	// Approved: waiting for clients before the old CA is dropped has its own test.
	f.ApproveDropOldCA = DropOldCAApproval(u.Client.Trust)
	return f
}

// userSteady is an n-member cluster running on the user's material: every Secret holds it, every
// Pod started on it and serves it.
func userSteady(t *testing.T, n int, u *UserTLS, now time.Time) Facts {
	t.Helper()
	f := userFacts(now, u)
	for _, name := range memberNames(n) {
		s := userSecret(u)
		f.Members = append(f.Members, Member{Name: name, Secret: s, Pod: podFor(s)})
	}
	return f
}

// restartMember is the rollout engine restarting a member: it loads the trust its Secret holds
// and serves the Secret's leaves.
func restartMember(f *Facts, name string) {
	for i := range f.Members {
		if m := &f.Members[i]; m.Name == name {
			s := readBack(*m.Secret)
			m.Pod = podFor(&s)
		}
	}
}

func fp8(c *x509.Certificate) string {
	if c == nil {
		return "none"
	}
	return pki.Fingerprint(c)[:8]
}

func fps8(cs []*x509.Certificate) string {
	var out []string
	for _, fp := range pki.Fingerprints(cs) {
		out = append(out, fp[:8])
	}
	return strings.Join(out, ",")
}

func leafFP(l *pki.Leaf) string {
	if l == nil {
		return "none"
	}
	return fp8(l.Cert)
}

// writeLine is one member write as a comparable line: leaves and both bundles.
func writeLine(w MemberWrite) string {
	return fmt.Sprintf("write %s %q server=%s peer=%s trust=%s client=%s", w.Name, w.Why,
		leafFP(w.Secret.Server), leafFP(w.Secret.Peer), fps8(w.Secret.Trust), fps8(w.Secret.ClientBundle()))
}

// userSummary is everything a decision on user Secrets says, for comparing two decisions.
func userSummary(d Decision) string {
	var b strings.Builder
	for _, w := range d.WriteMembers {
		b.WriteString(writeLine(w) + "\n")
	}
	fmt.Fprintf(&b, "ca=%v app=%v outdated=%v pass=%s hold=%q pending=%q expiring=%q trust=%s",
		d.WriteCA != nil, d.WriteAppClient != nil, outdatedNames(d), d.Pass, d.Hold, d.Pending, d.Expiring, fps8(d.Trust))
	return b.String()
}

// requireUserMaterial fails unless s holds exactly the user's leaves and bundles.
func requireUserMaterial(t *testing.T, who string, s *MemberSecret, u *UserTLS) {
	t.Helper()
	if s == nil {
		t.Fatalf("%s: no Secret", who)
	}
	if !sameCert(s.Server.Cert, u.Client.Leaf.Cert) || !sameCert(s.Peer.Cert, u.Peer.Leaf.Cert) || s.Server.Key == nil || s.Peer.Key == nil {
		t.Errorf("%s: server %s peer %s, want the user's %s and %s", who, leafFP(s.Server), leafFP(s.Peer), leafFP(u.Client.Leaf), leafFP(u.Peer.Leaf))
	}
	if fps8(s.Trust) != fps8(u.Peer.Trust) || fps8(s.ClientBundle()) != fps8(u.Client.Trust) {
		t.Errorf("%s: bundles peer=%s client=%s, want peer=%s client=%s", who, fps8(s.Trust), fps8(s.ClientBundle()), fps8(u.Peer.Trust), fps8(u.Client.Trust))
	}
}

// requireNoRenewAt: Steward renews nothing on user Secrets, so status shows no renewal time and
// no renewal requeue.
func requireNoRenewAt(t *testing.T, d Decision) {
	t.Helper()
	if len(d.Certificates) == 0 {
		t.Error("no certificates in the decision's status")
	}
	for _, c := range d.Certificates {
		if !c.RenewAt.IsZero() {
			t.Errorf("certificate %s has RenewAt %s; the user renews it", c.Name, c.RenewAt)
		}
	}
	if d.RequeueAfter != 0 {
		t.Errorf("RequeueAfter = %s, want none", d.RequeueAfter)
	}
}

// A new cluster on user Secrets: every member's Secret is seeded with the user's material at once,
// nothing restarts, nothing is pending, and once the Pods run on it nothing more happens.
func TestUserFreshCluster(t *testing.T) {
	a, c := mustCA(t, t0.Add(-day), caLife), mustCA(t, t0.Add(-day), caLife)
	for _, tt := range []struct {
		name string
		u    *UserTLS
	}{
		{"one CA for both planes", userTLS(t, a, a, t0.Add(-time.Hour))},
		{"a CA per plane", userTLS(t, a, c, t0.Add(-time.Hour))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := userFacts(t0, tt.u)
			for _, name := range memberNames(3) {
				f.Members = append(f.Members, Member{Name: name})
			}
			d := Decide(f)
			if got := writtenNames(d); !slices.Equal(got, memberNames(3)) {
				t.Fatalf("writes %v, want every member", got)
			}
			for _, w := range d.WriteMembers {
				requireUserMaterial(t, w.Name, &w.Secret, tt.u)
			}
			if d.WriteCA != nil || d.WriteAppClient != nil || len(outdatedNames(d)) > 0 || d.Hold != "" || d.Pending != "" || d.Pass != pki.Done {
				t.Errorf("fresh cluster: %s", userSummary(d))
			}
			if fps8(d.Trust) != fps8(tt.u.Peer.Trust) {
				t.Errorf("Decision.Trust %s, want the user's peer ca.crt %s", fps8(d.Trust), fps8(tt.u.Peer.Trust))
			}
			applyWrites(&f, d)
			for i := range f.Members {
				s := readBack(*f.Members[i].Secret)
				f.Members[i].Secret, f.Members[i].Pod = &s, podFor(&s)
			}
			d = Decide(f)
			requireNoOp(t, d)
			requireNoRenewAt(t, d)
		})
	}
}

// Running on the user's material is a fixed point, whether the members answer or not.
func TestUserSteadyStateIsNoOp(t *testing.T) {
	a, c := mustCA(t, t0.Add(-day), caLife), mustCA(t, t0.Add(-day), caLife)
	for _, u := range []*UserTLS{userTLS(t, a, a, t0.Add(-day)), userTLS(t, a, c, t0.Add(-day))} {
		f := userSteady(t, 3, u, t0)
		d := Decide(f)
		requireNoOp(t, d)
		requireNoRenewAt(t, d)
		for i := range f.Members {
			f.Members[i].Pod.Served, f.Members[i].Pod.ServedPeer = nil, nil
		}
		requireNoOp(t, Decide(f))
		// A member whose Pod is gone (being recreated) keeps its Secret as it is.
		f.Members[2].Pod = nil
		requireNoOp(t, Decide(f))
	}
}

// The user renews a leaf (same ca.crt, new tls.crt): Steward copies it onto every member without a
// restart and without calling it a rotation, and waits until every answering member serves it on
// that plane's port (the peer plane through ServedPeer, the client plane through Served).
func TestUserLeafRenewal(t *testing.T) {
	a, c := mustCA(t, t0.Add(-day), caLife), mustCA(t, t0.Add(-day), caLife)
	for _, plane := range []string{"peer", "client"} {
		t.Run(plane, func(t *testing.T) {
			u0 := userTLS(t, a, c, t0.Add(-30*day))
			f := userSteady(t, 3, u0, t0)
			u1 := *u0
			var fresh *pki.Leaf
			// served is the port this plane's leaf is seen on.
			served := func(p *Pod) **x509.Certificate { return &p.ServedPeer }
			if plane == "peer" {
				fresh = userLeaf(t, a, pki.Peer, t0, leafLife)
				u1.Peer.Leaf = fresh
			} else {
				fresh = userLeaf(t, c, pki.Server, t0, leafLife)
				u1.Client.Leaf = fresh
				served = func(p *Pod) **x509.Certificate { return &p.Served }
			}
			f.User = &u1

			d := Decide(f)
			if got := writtenNames(d); !slices.Equal(got, memberNames(3)) {
				t.Fatalf("writes %v, want every member", got)
			}
			for _, w := range d.WriteMembers {
				requireUserMaterial(t, w.Name, &w.Secret, &u1)
			}
			if len(outdatedNames(d)) > 0 || d.Pass != pki.Done || d.Hold != "" || !mentions(d.Pending, plane+" plane") {
				t.Fatalf("renewal: %s", userSummary(d))
			}

			// Written, not served yet. The other port serves what its Secret holds, which is up
			// to date: only this plane's port tells whether the renewal arrived.
			applyWrites(&f, d)
			d = Decide(f)
			if len(d.WriteMembers) > 0 || len(outdatedNames(d)) > 0 || d.Pass != pki.Done ||
				!mentions(d.Pending, plane+" plane", "etcd-0", "etcd-1", "etcd-2") {
				t.Fatalf("written, nothing served yet: %s", userSummary(d))
			}
			*served(f.Members[0].Pod) = fresh.Cert
			*served(f.Members[1].Pod) = nil // not answering: it serves its Secret's leaf when back
			d = Decide(f)
			if !mentions(d.Pending, "etcd-2") || mentions(d.Pending, "etcd-0") || mentions(d.Pending, "etcd-1") ||
				len(d.WriteMembers) > 0 || len(outdatedNames(d)) > 0 {
				t.Fatalf("etcd-0 serves it, etcd-1 silent: %s", userSummary(d))
			}
			*served(f.Members[2].Pod) = fresh.Cert
			requireNoOp(t, Decide(f))
		})
	}
}

// Only the client plane's CA changes: the peer plane does nothing, the client plane widens.
func TestUserClientCAOnly(t *testing.T) {
	a, c := mustCA(t, t0.Add(-day), caLife), mustCA(t, t0, caLife)
	u0 := userTLS(t, a, a, t0.Add(-day))
	f := userSteady(t, 3, u0, t0)
	u1 := *u0
	u1.Client = userTLS(t, c, c, t0).Client
	f.User = &u1
	d := Decide(f)
	if d.Pass != pki.WidenTrust || !slices.Equal(outdatedNames(d), memberNames(3)) || !mentions(d.Pending, "client plane") || mentions(d.Pending, "peer plane") {
		t.Fatalf("client CA changed: %s", userSummary(d))
	}
	for _, w := range d.WriteMembers {
		s := w.Secret
		if !sameCert(s.Peer.Cert, u0.Peer.Leaf.Cert) || fps8(s.Trust) != fps8(u0.Peer.Trust) {
			t.Errorf("%s: the peer plane changed (peer %s, bundle %s)", w.Name, leafFP(s.Peer), fps8(s.Trust))
		}
		if !sameCert(s.Server.Cert, u0.Client.Leaf.Cert) {
			t.Errorf("%s: the new client leaf was written before every member trusts its CA", w.Name)
		}
		if got, want := fps8(s.ClientBundle()), fps8([]*x509.Certificate{a.Cert, c.Cert}); got != want {
			t.Errorf("%s: client bundle %s, want held ∪ user's %s", w.Name, got, want)
		}
	}
}

// The user changes the peer plane's CA and renews the client plane's leaf at once (a
// certificate manager renewing on its own schedule): the client plane's bundle must not pick up
// the peer plane's new CA, which the user never gave the client plane.
func TestUserPeerCAChangeKeepsClientBundle(t *testing.T) {
	a, b := mustCA(t, t0.Add(-day), caLife), mustCA(t, t0, caLife)
	u0 := userTLS(t, a, a, t0.Add(-30*day))
	f := userSteady(t, 3, u0, t0)
	u1 := &UserTLS{Peer: userTLS(t, b, b, t0).Peer, Client: Material{Leaf: userLeaf(t, a, pki.Server, t0, leafLife), Trust: u0.Client.Trust}}
	f.User = u1
	d := Decide(f)
	if d.Pass != pki.WidenTrust || len(d.WriteMembers) != 3 {
		t.Fatalf("peer CA changed: %s", userSummary(d))
	}
	for _, w := range d.WriteMembers {
		if got, want := fps8(w.Secret.Trust), fps8([]*x509.Certificate{a.Cert, b.Cert}); got != want {
			t.Errorf("%s: peer bundle %s, want %s", w.Name, got, want)
		}
		if got, want := fps8(w.Secret.ClientBundle()), fps8(u0.Client.Trust); got != want {
			t.Errorf("%s: client bundle %s, want the client plane's own %s (the peer plane's new CA leaked into it)", w.Name, got, want)
		}
	}
}

// A member added while a rotation is under way joins on what the others run with: its Secret is
// seeded from theirs (not from the user's leaf, which not every member trusts yet), and being
// new it is not restarted by the pass.
func TestUserMemberAddedMidRotation(t *testing.T) {
	a, b := mustCA(t, t0.Add(-day), caLife), mustCA(t, t0, caLife)
	u0, u1 := userTLS(t, a, a, t0.Add(-day)), userTLS(t, b, b, t0)
	f := userSteady(t, 3, u0, t0)
	f.User = u1
	d := Decide(f)
	if d.Pass != pki.WidenTrust {
		t.Fatalf("pass %s, want WidenTrust", d.Pass)
	}
	applyWrites(&f, d)
	restartMember(&f, "etcd-2")
	f.Members = append(f.Members, Member{Name: "etcd-3"})

	d = Decide(f)
	w := write(d, "etcd-3")
	if w == nil {
		t.Fatalf("no Secret for the new member: %s", userSummary(d))
	}
	peers := f.Members[0].Secret
	if !sameCert(w.Secret.Server.Cert, u0.Client.Leaf.Cert) || !sameCert(w.Secret.Peer.Cert, u0.Peer.Leaf.Cert) ||
		fps8(w.Secret.Trust) != fps8(peers.Trust) || fps8(w.Secret.ClientBundle()) != fps8(peers.ClientBundle()) {
		t.Errorf("new member seeded with %s, want the others' Secret", writeLine(*w))
	}
	if got := outdatedNames(d); !slices.Equal(got, []string{"etcd-0", "etcd-1"}) || d.Pass != pki.WidenTrust {
		t.Errorf("outdated %v pass %s, want etcd-0 and etcd-1 still to restart in WidenTrust", got, d.Pass)
	}
	for _, o := range writtenNames(d) {
		if o != "etcd-3" {
			t.Errorf("rewrote %s, whose Secret already holds the pass's material", o)
		}
	}

	// Later in the rotation, once the leaves are swapped, a new member gets the user's leaf with
	// the wide bundle: it meets members that still trust the old CA too.
	applyWrites(&f, d)
	f.Members = f.Members[:3]
	restartMember(&f, "etcd-1")
	restartMember(&f, "etcd-0")
	d = Decide(f)
	if d.Pass != pki.SwapLeaves {
		t.Fatalf("pass %s, want SwapLeaves", d.Pass)
	}
	applyWrites(&f, d)
	f.Members = append(f.Members, Member{Name: "etcd-3"})
	d = Decide(f)
	if w = write(d, "etcd-3"); w == nil || !sameCert(w.Secret.Server.Cert, u1.Client.Leaf.Cert) || !sameCert(w.Secret.Peer.Cert, u1.Peer.Leaf.Cert) ||
		fps8(w.Secret.Trust) != fps8([]*x509.Certificate{a.Cert, b.Cert}) {
		t.Errorf("new member during SwapLeaves: %s", userSummary(d))
	}
}

// A crash between two Secret writes: Decide on the same facts decides the same, and after only
// part of a decision's writes landed it decides the rest of them, with the same restarts.
func TestUserCrashSafety(t *testing.T) {
	a, b, c := mustCA(t, t0.Add(-day), caLife), mustCA(t, t0, caLife), mustCA(t, t0, caLife)
	u0, u1 := userTLS(t, a, a, t0.Add(-day)), userTLS(t, b, c, t0)
	f := userSteady(t, 3, u0, t0)
	f.User, f.ApproveDropOldCA = u1, DropOldCAApproval(u1.Client.Trust)
	stages := 0
	for step := 0; step < 20; step++ {
		d := Decide(f)
		if again := Decide(f); userSummary(again) != userSummary(d) {
			t.Fatalf("step %d: Decide on the same facts differs:\n%s\n%s", step, userSummary(d), userSummary(again))
		}
		if noOp(d) {
			break
		}
		if len(d.WriteMembers) > 1 {
			stages++
			partial := f
			partial.Members = slices.Clone(f.Members)
			applyWrites(&partial, Decision{WriteMembers: d.WriteMembers[:1]})
			after := Decide(partial)
			var want, got []string
			for _, w := range d.WriteMembers[1:] {
				want = append(want, writeLine(w))
			}
			for _, w := range after.WriteMembers {
				got = append(got, writeLine(w))
			}
			if !slices.Equal(got, want) || !slices.Equal(outdatedNames(after), outdatedNames(d)) || after.Pass != d.Pass {
				t.Fatalf("step %d, after a crash past the first write:\n%s\nwant the rest of\n%s", step, userSummary(after), userSummary(d))
			}
		}
		landStep(&f, d)
		for i := range f.Members { // everyone serves what its Secret holds by the next reconcile
			f.Members[i].Pod.Served, f.Members[i].Pod.ServedPeer = f.Members[i].Secret.Server.Cert, f.Members[i].Secret.Peer.Cert
		}
	}
	if stages < 3 {
		t.Errorf("only %d reconciles wrote several Secrets; the rotation should have widened, swapped and dropped", stages)
	}
	for _, m := range f.Members {
		requireUserMaterial(t, m.Name, m.Secret, u1)
	}
}

// The trust annotation keeps the short form when the planes trust the same CAs, and names each
// plane when they do not; both read back to the same sets.
func TestFormatParsePlaneTrust(t *testing.T) {
	a, b := mustCA(t, t0, caLife), mustCA(t, t0.Add(time.Hour), caLife)
	ab := []*x509.Certificate{a.Cert, b.Cert}

	same := FormatPlaneTrust(ab, []*x509.Certificate{b.Cert, a.Cert, b.Cert})
	if same != FormatTrust(ab) || strings.Contains(same, "=") {
		t.Errorf("equal planes: %q, want the short form %q", same, FormatTrust(ab))
	}
	peer, client := ParsePlaneTrust(same)
	if !slices.Equal(peer, fps(a, b)) || !slices.Equal(client, fps(a, b)) {
		t.Errorf("short form read back as peer=%v client=%v", peer, client)
	}

	diff := FormatPlaneTrust([]*x509.Certificate{a.Cert}, ab)
	if want := "peer=" + FormatTrust([]*x509.Certificate{a.Cert}) + ";client=" + FormatTrust(ab); diff != want {
		t.Errorf("different planes: %q, want %q", diff, want)
	}
	peer, client = ParsePlaneTrust(diff)
	if !slices.Equal(peer, fps(a)) || !slices.Equal(client, fps(a, b)) {
		t.Errorf("plane form read back as peer=%v client=%v", peer, client)
	}
	// A hand-edited annotation listing a plane's CAs in another order reads as the same sets.
	parts := strings.Split(diff, ";")
	cl := strings.Split(strings.TrimPrefix(parts[1], "client="), ",")
	slices.Reverse(cl)
	parts[1] = "client=" + strings.Join(cl, ",")
	if p, c := ParsePlaneTrust(strings.Join(parts, ";")); !slices.Equal(p, peer) || !slices.Equal(c, client) {
		t.Errorf("reordered annotation read back as peer=%v client=%v", p, c)
	}
	if p, c := ParsePlaneTrust(""); p != nil || c != nil {
		t.Errorf("no annotation read back as peer=%v client=%v", p, c)
	}
	// The Pod's accessors follow the annotation's form.
	p := &Pod{Trust: fps(a)}
	if !slices.Equal(p.ClientPlaneTrust(), fps(a)) {
		t.Errorf("one-form Pod: client plane trusts %v", p.ClientPlaneTrust())
	}
	p.ClientTrust = fps(a, b)
	if !slices.Equal(p.ClientPlaneTrust(), fps(a, b)) {
		t.Errorf("two-form Pod: client plane trusts %v", p.ClientPlaneTrust())
	}
}

// Steward cannot renew the user's certificates: once one is past its renewal point it says so,
// naming the plane and the expiry, and still changes nothing.
func TestUserExpiring(t *testing.T) {
	a, c := mustCA(t, t0.Add(-100*day), caLife), mustCA(t, t0.Add(-100*day), caLife)
	for _, plane := range []string{"peer", "client"} {
		t.Run(plane, func(t *testing.T) {
			u := userTLS(t, a, c, t0.Add(-day))
			// 70 of 90 days gone: past the two-thirds renewal point, not expired.
			old := t0.Add(-70 * day)
			var leaf *pki.Leaf
			if plane == "peer" {
				leaf = userLeaf(t, a, pki.Peer, old, leafLife)
				u.Peer.Leaf = leaf
			} else {
				leaf = userLeaf(t, c, pki.Server, old, leafLife)
				u.Client.Leaf = leaf
			}
			d := Decide(userSteady(t, 3, u, t0))
			if !mentions(d.Expiring, plane+" plane", leaf.Cert.NotAfter.UTC().Format(time.RFC3339), "Secret") {
				t.Errorf("Expiring = %q, want the %s plane and its expiry named", d.Expiring, plane)
			}
			d.Expiring = ""
			requireNoOp(t, d)
			requireNoRenewAt(t, d)
		})
	}
	t.Run("before the renewal point", func(t *testing.T) {
		u := userTLS(t, a, c, t0.Add(-59*day))
		if d := Decide(userSteady(t, 3, u, t0)); d.Expiring != "" {
			t.Errorf("Expiring = %q for leaves 59 of 90 days old", d.Expiring)
		}
	})
}

// Status says per plane whether a member serves its Secret's leaf: on user Secrets the planes'
// leaves change independently, so the peer leaf's Served comes from the peer port (ServedPeer),
// not from the client port.
func TestUserStatusServedPerPlane(t *testing.T) {
	a := mustCA(t, t0.Add(-day), caLife)
	u0 := userTLS(t, a, a, t0.Add(-30*day))
	f := userSteady(t, 1, u0, t0)
	u1 := *u0
	u1.Peer.Leaf = userLeaf(t, a, pki.Peer, t0, leafLife)
	f.User = &u1
	applyWrites(&f, Decide(f)) // the peer leaf is renewed; the Pod still presents the old one
	d := Decide(f)
	served := map[string]bool{}
	for _, c := range d.Certificates {
		served[c.Name] = c.Served
	}
	if !served["etcd-0/server"] {
		t.Errorf("etcd-0/server: Served false, but the client port presents the Secret's server leaf")
	}
	if served["etcd-0/peer"] {
		t.Errorf("etcd-0/peer: Served true, but the peer port still presents the old peer leaf (Pending %q)", d.Pending)
	}
}
