package tlsplan

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/pki"
)

// Renewal re-issues only the leaves past their renew point, keeps the rest bit-identical (a
// needless re-issue is churn and, for a served leaf, a pending wait), restarts nobody, and counts
// as done only once the member serves the new leaf.
func TestDecideRenewsOnlyDueLeaves(t *testing.T) {
	ca := mustCA(t, t0.Add(-day), caLife)
	f := steady(t, 3, ca, t0, t0)
	// etcd-0's peer and etcd-2's server leaf were re-issued a month later: not due with the rest.
	f.Members[0].Secret.Peer = mustLeaf(t)(ca.IssuePeer(names("etcd-0"), t0.Add(30*day), leafLife))
	f.Members[2].Secret.Server = mustLeaf(t)(ca.IssueServer(names("etcd-2"), t0.Add(30*day), leafLife))
	serveSecrets(&f)
	// etcd-1 was re-issued entirely a month later: nothing of it is due.
	f.Members[1].Secret = memberSecret(t, ca, "etcd-1", t0.Add(30*day), ca.Cert)
	serveSecrets(&f)
	// Two thirds of 90 days (plus the backdate) have passed since t0.
	f.Now = t0.Add(61 * day)
	before := slices.Clone(f.Members)

	d := Decide(f)
	if d.Hold != "" || len(outdatedNames(d)) > 0 || d.WriteCA != nil {
		t.Fatalf("Hold=%q outdated=%v WriteCA=%v: a renewal needs no restart", d.Hold, outdatedNames(d), d.WriteCA != nil)
	}
	if got := writtenNames(d); !slices.Equal(got, []string{"etcd-0", "etcd-2"}) {
		t.Fatalf("written %v, want etcd-0 and etcd-2", got)
	}
	w0, w2 := write(d, "etcd-0"), write(d, "etcd-2")
	if w0.Why != "renewal due" || w2.Why != "renewal due" {
		t.Errorf("Why = %q, %q, want renewal due", w0.Why, w2.Why)
	}
	// Renewed: fresh from now, by the CA, for the member.
	for _, c := range []struct {
		u    pki.Usage
		name string
		leaf *pki.Leaf
	}{{pki.Server, "etcd-0", w0.Secret.Server}, {pki.Peer, "etcd-2", w2.Secret.Peer}} {
		if !c.leaf.Cert.NotAfter.Equal(f.Now.Add(leafLife)) {
			t.Errorf("%s %s not renewed: expires %v", c.name, c.u, c.leaf.Cert.NotAfter)
		}
		m, err := c.leaf.Material(ca.Cert)
		if err != nil {
			t.Fatal(err)
		}
		if err := pki.Validate(m, pki.ExpectMember(c.u, names(c.name)), f.Now); err != nil {
			t.Errorf("renewed %s %s: %v", c.name, c.u, err)
		}
	}
	// Kept: the very same leaf, key included.
	if w0.Secret.Peer != before[0].Secret.Peer || w2.Secret.Server != before[2].Secret.Server {
		t.Error("a leaf that was not due was re-issued")
	}
	// etcd-0 still serves its old server leaf: the renewal is in flight.
	if !mentions(d.Pending, "etcd-0", "renewed") || strings.Contains(d.Pending, "etcd-1") {
		t.Errorf("Pending = %q, want etcd-0 named (and etcd-1 not)", d.Pending)
	}
	if d.Expiring != "" {
		t.Errorf("Expiring = %q a month before expiry", d.Expiring)
	}
	// Everything due is renewed by this decision, so the next look is when the leaves issued on
	// day 30 fall due, not now.
	if want := pki.RenewAt(f.Members[1].Secret.Server.Cert, fraction).Sub(f.Now); d.RequeueAfter != want {
		t.Errorf("RequeueAfter = %v, want %v", d.RequeueAfter, want)
	}

	// Once the kubelet has refreshed the volume and the member serves the renewal, all is done.
	applyWrites(&f, d)
	if d2 := Decide(f); !mentions(d2.Pending, "etcd-0") || len(d2.WriteMembers) > 0 {
		t.Errorf("before the volume refresh: Pending=%q writes=%v", d2.Pending, writtenNames(d2))
	}
	serveSecrets(&f)
	d3 := Decide(f)
	requireNoOp(t, d3)
}

// A member that does not answer is not waited for: it presents its Secret's leaf when it is back.
func TestDecideRenewalUnansweredNotPending(t *testing.T) {
	ca := mustCA(t, t0.Add(-day), caLife)
	f := steady(t, 2, ca, t0, t0.Add(61*day))
	f.Members[0].Pod.Served = nil
	f.Members[1].Secret = memberSecret(t, ca, "etcd-1", t0.Add(30*day), ca.Cert)
	serveSecrets(&f)
	f.Members[0].Pod.Served = nil

	d := Decide(f)
	if got := writtenNames(d); !slices.Equal(got, []string{"etcd-0"}) {
		t.Fatalf("written %v, want etcd-0", got)
	}
	if d.Pending != "" {
		t.Errorf("Pending = %q for a member that does not answer", d.Pending)
	}
}

// The application client leaf renews like a member's, keeping its trust bundle.
func TestDecideRenewsAppClient(t *testing.T) {
	ca := mustCA(t, t0.Add(-day), caLife)
	f := steady(t, 1, ca, t0, t0.Add(61*day))
	f.Members[0].Secret = memberSecret(t, ca, "etcd-0", t0.Add(30*day), ca.Cert)
	serveSecrets(&f)
	old := f.AppClient.Leaf

	d := Decide(f)
	if len(d.WriteMembers) > 0 || d.Pending != "" {
		t.Errorf("members %v pending %q, want only the client renewed", writtenNames(d), d.Pending)
	}
	if d.WriteAppClient == nil || sameCert(d.WriteAppClient.Leaf.Cert, old.Cert) || !signedBy(d.WriteAppClient.Leaf.Cert, ca) {
		t.Fatal("the due application client leaf was not renewed by the CA")
	}
	if !slices.Equal(pki.Fingerprints(d.WriteAppClient.Trust), fps(ca)) {
		t.Errorf("client trust %v", pki.Fingerprints(d.WriteAppClient.Trust))
	}
}

// Why a Secret is rewritten, for each way it can differ from what the pass wants. Leaves that can
// stay stay, so that a trust-only rewrite does not also re-issue.
func TestDecideRewriteReasons(t *testing.T) {
	ca := mustCA(t, t0.Add(-day), caLife)
	foreign := mustCA(t, t0.Add(-day), caLife)
	for _, tt := range []struct {
		name       string
		edit       func(s *MemberSecret)
		why        string
		keepServer bool
		keepPeer   bool
	}{
		{"trust bundle lacks the CA", func(s *MemberSecret) { s.Trust = pki.Bundle(foreign.Cert) }, "trust bundle for pass Done", true, true},
		{"trust bundle carries an extra CA", func(s *MemberSecret) { s.Trust = pki.Bundle(ca.Cert, foreign.Cert) }, "trust bundle for pass Done", true, true},
		{"peer leaf by another CA", func(s *MemberSecret) {
			s.Peer = mustLeaf(t)(foreign.IssuePeer(names("etcd-0"), t0, leafLife))
		}, "re-signing with the new CA", true, false},
		{"server leaf missing", func(s *MemberSecret) { s.Server = nil }, "missing", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := steady(t, 1, ca, t0, t0.Add(day))
			orig := *f.Members[0].Secret
			tt.edit(f.Members[0].Secret)
			d := Decide(f)
			w := write(d, "etcd-0")
			if w == nil {
				t.Fatalf("no write; decision %+v", d)
			}
			if w.Why != tt.why {
				t.Errorf("Why = %q, want %q", w.Why, tt.why)
			}
			if got := w.Secret.Server == orig.Server; got != tt.keepServer {
				t.Errorf("server kept = %v, want %v", got, tt.keepServer)
			}
			if got := w.Secret.Peer == orig.Peer; got != tt.keepPeer {
				t.Errorf("peer kept = %v, want %v", got, tt.keepPeer)
			}
			if !slices.Equal(pki.Fingerprints(w.Secret.Trust), fps(ca)) || !signedBy(w.Secret.Server.Cert, ca) || !signedBy(w.Secret.Peer.Cert, ca) {
				t.Error("the rewritten Secret is not the CA's material")
			}
			if len(outdatedNames(d)) > 0 {
				t.Errorf("TrustOutdated %v outside a rotation", outdatedNames(d))
			}
		})
	}
}

// A RenewFraction of 1 or more would renew at expiry; pki treats it as the default, and so does
// the plan: leaves are still renewed two thirds in.
func TestDecideFractionOutOfRangeUsesDefault(t *testing.T) {
	for _, fr := range []float64{0, 1, 1.5, -0.2} {
		ca := mustCA(t, t0.Add(-day), caLife)
		f := steady(t, 1, ca, t0, t0.Add(61*day))
		f.RenewFraction = fr
		if d := Decide(f); write(d, "etcd-0") == nil || d.WriteAppClient == nil {
			t.Errorf("fraction %v: leaves past two thirds not renewed", fr)
		}
	}
}

// Expiring warns of a certificate Steward may not replace in time: a served leaf in the last
// tenth of its life that is not its Secret's (the renewal has not reached the member), or a CA in
// its last tenth with no rotation under way.
func TestDecideExpiring(t *testing.T) {
	t.Run("served leaf near expiry, renewal not picked up", func(t *testing.T) {
		ca := mustCA(t, t0.Add(-100*day), caLife)
		f := steady(t, 2, ca, t0.Add(-day), t0)
		// etcd-1 still serves a leaf issued 85 days ago: 5 of 90 days left.
		f.Members[1].Pod.Served = mustLeaf(t)(ca.IssueServer(names("etcd-1"), t0.Add(-85*day), leafLife)).Cert
		d := Decide(f)
		if !mentions(d.Expiring, "etcd-1") {
			t.Errorf("Expiring = %q, want etcd-1 named", d.Expiring)
		}
		if !mentions(d.Pending, "etcd-1") {
			t.Errorf("Pending = %q", d.Pending)
		}
	})
	t.Run("served leaf renewed long ago is not expiring", func(t *testing.T) {
		ca := mustCA(t, t0.Add(-100*day), caLife)
		f := steady(t, 2, ca, t0.Add(-day), t0)
		// Served differs from the Secret, but has two thirds of its life left: no warning.
		f.Members[1].Pod.Served = mustLeaf(t)(ca.IssueServer(names("etcd-1"), t0.Add(-30*day), leafLife)).Cert
		if d := Decide(f); d.Expiring != "" {
			t.Errorf("Expiring = %q", d.Expiring)
		}
	})
	t.Run("near expiry but served is the Secret's leaf", func(t *testing.T) {
		// With a 0.95 renew fraction a leaf 92% through its life is neither due nor warned of: it
		// is what the Secret holds and Steward renews it in time.
		ca := mustCA(t, t0.Add(-100*day), caLife)
		f := steady(t, 1, ca, t0.Add(-83*day), t0)
		f.RenewFraction = 0.95
		d := Decide(f)
		requireNoOp(t, d)
		if d.Expiring != "" {
			t.Errorf("Expiring = %q", d.Expiring)
		}
	})
	t.Run("CA near expiry and no rotation", func(t *testing.T) {
		// A 100-day CA 92 days in, renewed at 95%: not due yet, but in its last tenth.
		ca := mustCA(t, t0, 100*day)
		now := t0.Add(92 * day)
		f := steady(t, 1, ca, now.Add(-time.Hour), now)
		f.RenewFraction = 0.95
		d := Decide(f)
		if d.WriteCA != nil || d.RotationStarted {
			t.Fatalf("the CA is not due at 95%%, yet WriteCA=%v", d.WriteCA != nil)
		}
		if !mentions(d.Expiring, "cluster CA", ca.Cert.NotAfter.UTC().Format(time.RFC3339)) {
			t.Errorf("Expiring = %q, want the CA's expiry", d.Expiring)
		}
	})
	t.Run("CA near expiry with a rotation under way", func(t *testing.T) {
		ca := mustCA(t, t0, 100*day)
		now := t0.Add(92 * day)
		f := steady(t, 1, ca, now.Add(-time.Hour), now)
		f.RenewFraction = 0.95
		f.NextCA = mustCA(t, now.Add(-time.Minute), caLife)
		d := Decide(f)
		if d.Pass != pki.WidenTrust || strings.Contains(d.Expiring, "CA") {
			t.Errorf("pass %s, Expiring %q: a rotation is replacing the CA", d.Pass, d.Expiring)
		}
	})
}

// Shortening spec.tls.certificateDuration takes effect at once: a leaf that outlives now plus the
// new lifetime is re-issued instead of waiting months for its renewal. A longer lifetime waits for
// the routine renewal, and a re-issued leaf is not re-issued again (no churn).
func TestDecideLeafLifetimeChange(t *testing.T) {
	ca := mustCA(t, t0.Add(-day), caLife)
	t.Run("shortened", func(t *testing.T) {
		f := steady(t, 2, ca, t0, t0.Add(day))
		f.LeafLifetime = 30 * day
		d := Decide(f)
		if got := writtenNames(d); len(got) != 2 {
			t.Fatalf("written %v, want both members", got)
		}
		for _, w := range d.WriteMembers {
			if w.Why != "lifetime shortened" {
				t.Errorf("%s: Why = %q", w.Name, w.Why)
			}
			for _, l := range []*pki.Leaf{w.Secret.Server, w.Secret.Peer} {
				if !l.Cert.NotAfter.Equal(f.Now.Add(30 * day)) {
					t.Errorf("%s: leaf expires %v, want now+30d", w.Name, l.Cert.NotAfter)
				}
			}
		}
		if d.WriteAppClient == nil || !d.WriteAppClient.Leaf.Cert.NotAfter.Equal(f.Now.Add(30*day)) {
			t.Error("the application client keeps its longer lifetime")
		}
		if len(outdatedNames(d)) > 0 {
			t.Errorf("TrustOutdated %v for a leaf change", outdatedNames(d))
		}
		applyWrites(&f, d)
		serveSecrets(&f)
		f.Now = f.Now.Add(time.Hour)
		requireNoOp(t, Decide(f))
	})
	t.Run("lengthened", func(t *testing.T) {
		f := steady(t, 2, ca, t0, t0.Add(day))
		f.LeafLifetime = 180 * day
		requireNoOp(t, Decide(f))
	})
	t.Run("a leaf capped by its CA is not shortened", func(t *testing.T) {
		// A 60-day CA caps 90-day leaves; they are shorter than the lifetime, not longer.
		short := mustCA(t, t0, 60*day)
		f := steady(t, 1, short, t0, t0.Add(day))
		f.RenewFraction = 0.99 // keep the CA itself from falling due in this test
		requireNoOp(t, Decide(f))
	})
}
