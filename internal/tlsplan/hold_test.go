package tlsplan

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/pki"
)

// requireHold fails unless the decision refuses to disrupt anything: a Hold, nobody marked for a
// restart, no leaf re-issued.
func requireHold(t *testing.T, d Decision, words ...string) {
	t.Helper()
	if !mentions(d.Hold, words...) {
		t.Errorf("Hold = %q, want it to name %v", d.Hold, words)
	}
	if len(outdatedNames(d)) > 0 {
		t.Errorf("TrustOutdated %v while held", outdatedNames(d))
	}
	if d.WriteCA != nil || len(d.WriteMembers) > 0 {
		t.Errorf("WriteCA=%v members=%v while held", d.WriteCA != nil, writtenNames(d))
	}
}

// A state that breaks the invariant or names a CA Steward does not know is refused, never planned
// around: restarting anyone then could leave two parties unable to authenticate each other.
func TestDecideHoldsOnUnsafeRotationState(t *testing.T) {
	old, next := mustCA(t, t0.Add(-day), caLife), mustCA(t, t0, caLife)
	foreign := mustCA(t, t0, caLife)
	now := t0.Add(time.Hour)
	widened := [3][4]string{{"on", "o", "o", "on"}, {"on", "o", "o", "on"}, {"on", "o", "o", "on"}}
	for _, tt := range []struct {
		name  string
		edit  func(f *Facts)
		words []string
	}{
		{"a Pod trusts a CA that is neither current nor next", func(f *Facts) {
			f.Members[1].Pod.Trust = fps(foreign)
		}, []string{"etcd-1", "neither"}},
		{"a Pod records no trust at all", func(f *Facts) {
			f.Members[2].Pod.Trust = ParseTrust("")
		}, []string{"etcd-2", "neither"}},
		{"a member serves a leaf of an unknown CA", func(f *Facts) {
			f.Members[0].Pod.Served = mustLeaf(t)(foreign.IssueServer(names("etcd-0"), t0, leafLife)).Cert
		}, []string{"etcd-0", "neither"}},
		{"the application client is signed by an unknown CA", func(f *Facts) {
			f.AppClient = appClient(t, foreign, t0, old.Cert, next.Cert)
		}, []string{"client", "neither"}},
		// etcd-0 already dropped the old CA while its peers still present old-signed leaves.
		{"a member trusts the new CA alone while old-signed leaves are served", func(f *Facts) {
			f.Members[0].Pod.Trust = fps(next)
		}, []string{"old-signed", "refusing"}},
		// etcd-2 serves a new-signed leaf to a peer that never widened.
		{"a new-signed leaf reaches a member trusting the old CA alone", func(f *Facts) {
			f.Members[1].Pod.Trust = fps(old)
			f.Members[2].Pod.Served = mustLeaf(t)(next.IssueServer(names("etcd-2"), t0, leafLife)).Cert
		}, []string{"new-signed", "refusing"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := rotationFacts(t, old, next, now, widened, "oon")
			tt.edit(&f)
			d := Decide(f)
			requireHold(t, d, tt.words...)
			if d.Pass != pki.Done {
				t.Errorf("Pass = %s while held", d.Pass)
			}
			// The operator keeps reaching every member while held: it trusts both CAs.
			if !mentions(strings.Join(pki.Fingerprints(d.Trust), ","), pki.Fingerprint(old.Cert), pki.Fingerprint(next.Cert)) {
				t.Errorf("held decision's trust %v lacks a CA", pki.Fingerprints(d.Trust))
			}
		})
	}
}

// DropOldCA restarts nobody until every answering member serves the leaf its Secret holds: a
// member that stopped trusting the old CA must never meet a peer still presenting an older leaf.
func TestDecideDropOldCAWaitsForServedLeaves(t *testing.T) {
	old, next := mustCA(t, t0.Add(-day), caLife), mustCA(t, t0, caLife)
	now := t0.Add(time.Hour)
	swapped := [3][4]string{{"on", "n", "n", "n"}, {"on", "n", "n", "n"}, {"on", "n", "n", "n"}}

	t.Run("renewed Secret not served yet", func(t *testing.T) {
		f := rotationFacts(t, old, next, now, swapped, "non")
		// etcd-1's Secret holds a newer leaf than the one it serves (the kubelet lags).
		f.Members[1].Pod.Served = mustLeaf(t)(next.IssueServer(names("etcd-1"), t0, leafLife)).Cert
		d := Decide(f)
		if d.Pass != pki.DropOldCA {
			t.Fatalf("Pass = %s", d.Pass)
		}
		if len(outdatedNames(d)) > 0 {
			t.Errorf("TrustOutdated %v before etcd-1 serves its Secret's leaf", outdatedNames(d))
		}
		if !mentions(d.Pending, "etcd-1", "old CA is dropped") || strings.Contains(d.Pending, "etcd-0") {
			t.Errorf("Pending = %q, want etcd-1 (only) named", d.Pending)
		}
	})
	t.Run("Secret re-issued this reconcile", func(t *testing.T) {
		f := rotationFacts(t, old, next, now, swapped, "non")
		f.Members[2].Secret = nil // unreadable: re-issued now, so etcd-2 serves something else
		d := Decide(f)
		if w := write(d, "etcd-2"); w == nil || w.Why != "missing" || !signedBy(w.Secret.Server.Cert, next) {
			t.Fatalf("etcd-2 not re-issued by the new CA: %+v", w)
		}
		if len(outdatedNames(d)) > 0 || !mentions(d.Pending, "etcd-2") {
			t.Errorf("TrustOutdated %v Pending %q", outdatedNames(d), d.Pending)
		}
	})
	t.Run("a member that does not answer does not block", func(t *testing.T) {
		f := rotationFacts(t, old, next, now, swapped, "non")
		f.Members[0].Pod.Served = nil // it presents its Secret's (new-signed) leaf when back
		d := Decide(f)
		if got := outdatedNames(d); len(got) != 3 {
			t.Errorf("TrustOutdated %v, want all three", got)
		}
	})
	t.Run("all served", func(t *testing.T) {
		d := Decide(rotationFacts(t, old, next, now, swapped, "non"))
		if got := outdatedNames(d); len(got) != 3 || !mentions(d.Pending, "DropOldCA", "etcd-0", "etcd-1", "etcd-2") {
			t.Errorf("TrustOutdated %v Pending %q", got, d.Pending)
		}
	})
}

// Outside a rotation the same rule holds: Pods that never loaded the current CA cannot verify
// leaves it signs. Here the CA Secret was restored from the wrong backup, so the members run on
// a CA the operator does not hold. Re-signing their leaves with the current CA would make every
// peer handshake fail at once (etcd re-reads leaves on every handshake, but not its trust), so
// the state must be held, exactly as it is during a rotation.
//
// BUG: PlanRotation returns Done without looking at the members when there is no next CA, and
// Decide then re-issues every leaf ("re-signing with the new CA") with no Hold.
func TestDecideHoldsWhenPodsDoNotTrustTheCA(t *testing.T) {
	lost := mustCA(t, t0.Add(-day), caLife) // what the members run on
	restored := mustCA(t, t0.Add(-day), caLife)
	f := steady(t, 3, lost, t0, t0.Add(day))
	f.CA = restored

	d := Decide(f)
	if d.Hold == "" {
		t.Errorf("no Hold although no member trusts the CA; decision writes %v (%s)", writtenNames(d), firstWhy(d))
	}
	if len(d.WriteMembers) > 0 {
		t.Errorf("re-signing %v with a CA their peers do not trust breaks every peer connection", writtenNames(d))
	}
}

func firstWhy(d Decision) string {
	if len(d.WriteMembers) == 0 {
		return ""
	}
	return d.WriteMembers[0].Why
}

// Pending during SwapLeaves is read by people: each member it waits for is named once, although a
// member whose Secret now holds a new-signed leaf while it still serves the old-signed one is both
// unserved and pending in the rotation plan (regression: both lists used to be concatenated).
func TestDecideSwapLeavesPendingNamesEachMemberOnce(t *testing.T) {
	old, next := mustCA(t, t0.Add(-day), caLife), mustCA(t, t0, caLife)
	f := rotationFacts(t, old, next, t0.Add(time.Hour), [3][4]string{{"on", "o", "o", "on"}, {"on", "o", "o", "on"}, {"on", "o", "o", "on"}}, "oon")
	d := Decide(f)
	if d.Pass != pki.SwapLeaves {
		t.Fatalf("Pass = %s", d.Pass)
	}
	for _, name := range memberNames(3) {
		if n := strings.Count(d.Pending, name); n != 1 {
			t.Errorf("Pending names %s %d times: %q", name, n, d.Pending)
		}
	}
}

// When only the application client is still old-signed, SwapLeaves waits for no member; Pending
// must still say what it waits for rather than name nobody.
//
// BUG: Pending reads "CA rotation pass SwapLeaves: waiting for  to serve the new-signed
// certificate" (an empty list), since rot.PendingClients is not reported.
func TestDecideSwapLeavesPendingClientOnly(t *testing.T) {
	old, next := mustCA(t, t0.Add(-day), caLife), mustCA(t, t0, caLife)
	f := rotationFacts(t, old, next, t0.Add(time.Hour), [3][4]string{{"on", "n", "n", "on"}, {"on", "n", "n", "on"}, {"on", "n", "n", "on"}}, "oon")
	d := Decide(f)
	if d.Pass != pki.SwapLeaves || d.WriteAppClient == nil || !signedBy(d.WriteAppClient.Leaf.Cert, next) {
		t.Fatalf("pass %s: the old-signed client leaf must be re-issued by the new CA", d.Pass)
	}
	if strings.Contains(d.Pending, "for  to") || !strings.Contains(d.Pending, "client") {
		t.Errorf("Pending = %q, want it to name the client it waits for", d.Pending)
	}
}

// A leaf that cannot be issued holds everything (fail closed): here the current CA expired before
// its rotation got anywhere, and WidenTrust signs with it. Note that nothing in the package can
// move on from this state by itself (see the report): WidenTrust keeps needing the expired CA.
func TestDecideHoldsWhenTheSignerCannotIssue(t *testing.T) {
	ca := mustCA(t, t0, 100*day)
	now := t0.Add(101 * day)
	f := steady(t, 2, ca, t0, now)
	f.NextCA = mustCA(t, now.Add(-time.Hour), caLife)
	d := Decide(f)
	requireHold(t, d, "etcd-0", "expired")
	if d.WriteAppClient != nil {
		t.Error("application client written while held")
	}
	// The missing-material path holds the same way: a member without a Secret cannot get one.
	f.Members[1].Secret = nil
	requireHold(t, Decide(f), "expired")
}

// A CA Secret lost while members hold leaves it signed: no new CA (it would lock them out), a
// hold naming the Secret instead; a member's Pod alone counts too (its Secret may be unreadable).
func TestDecideHoldsWhenTheCAIsLost(t *testing.T) {
	now := t0.Add(time.Hour)
	f := steady(t, 3, mustCA(t, t0, caLife), t0, now)
	f.CA, f.CASecret = nil, "db-ca"
	for name, mutate := range map[string]func(*Facts){
		"Secrets and Pods": func(*Facts) {},
		"a Pod only": func(f *Facts) {
			for i := range f.Members {
				f.Members[i].Secret = nil
			}
		},
	} {
		g := f
		g.Members = slices.Clone(f.Members)
		mutate(&g)
		d := Decide(g)
		if d.WriteCA != nil || len(d.WriteMembers) != 0 || !mentions(d.Hold, "db-ca", "missing", "restore") {
			t.Errorf("%s: CA written %v, writes %v, hold %q", name, d.WriteCA != nil, writtenNames(d), d.Hold)
		}
	}
}
