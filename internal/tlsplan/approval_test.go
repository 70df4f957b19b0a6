package tlsplan

import (
	"crypto/x509"
	"slices"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/pki"
)

// DropOldCA waits for clients that load certificates once: it starts on the rotation's own
// approval value or when the grace has passed, never on a stale approval, and a drop already
// begun finishes. While it waits, members keep both CAs in their Secrets.
func TestDropOldCAWaitsForClients(t *testing.T) {
	old, next := mustCA(t, t0.Add(-day), caLife), mustCA(t, t0, caLife)
	now := t0.Add(time.Hour)
	swapped := [3][4]string{{"on", "n", "n", "n"}, {"on", "n", "n", "n"}, {"on", "n", "n", "n"}}
	begun := [3][4]string{{"n", "n", "n", "n"}, {"on", "n", "n", "n"}, {"on", "n", "n", "n"}}
	issued := t0 // when the application's new-signed certificate was issued (rotationFacts)
	approval := DropOldCAApproval([]*x509.Certificate{next.Cert})
	for _, tt := range []struct {
		name     string
		state    [3][4]string
		approve  string
		grace    time.Duration
		now      time.Time
		wait     bool
		until    time.Time
		restarts []string
	}{
		{"no approval, within the default week", swapped, "", 0, now, true, issued.Add(DefaultClientGrace), nil},
		{"approved", swapped, approval, 0, now, false, time.Time{}, []string{"etcd-0", "etcd-1", "etcd-2"}},
		{"an approval of another rotation", swapped, DropOldCAApproval([]*x509.Certificate{old.Cert}), 0, now, true, issued.Add(DefaultClientGrace), nil},
		{"the grace has passed", swapped, "", time.Hour, issued.Add(time.Hour), false, time.Time{}, []string{"etcd-0", "etcd-1", "etcd-2"}},
		{"a grace below the application wait counts as that wait", swapped, "", time.Second, issued.Add(time.Minute), true, issued.Add(DefaultAppGrace), nil},
		{"a member already dropped the old CA", begun, "", 0, now, false, time.Time{}, []string{"etcd-1", "etcd-2"}},
		{"the wait ends with the old CA", swapped, "", 10 * 365 * day, now, true, old.Cert.NotAfter, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := rotationFacts(t, old, next, tt.now, tt.state, "non")
			f.ApproveDropOldCA, f.ClientGrace = tt.approve, tt.grace
			// A crash left the member Secrets on the new CA alone, as before this wait existed.
			for _, m := range f.Members {
				m.Secret.Trust = []*x509.Certificate{next.Cert}
			}
			d := Decide(f)
			if d.Pass != pki.DropOldCA || d.Hold != "" {
				t.Fatalf("pass %s hold %q", d.Pass, d.Hold)
			}
			if got := outdatedNames(d); !slices.Equal(got, tt.restarts) {
				t.Errorf("restarts %v, want %v", got, tt.restarts)
			}
			if (d.AwaitingClients != nil) != tt.wait {
				t.Fatalf("awaiting clients %+v, want %v", d.AwaitingClients, tt.wait)
			}
			if !tt.wait {
				return
			}
			if !d.AwaitingClients.Until.Equal(tt.until) || d.AwaitingClients.Approval != approval || !mentions(d.Pending, approval, "kube-apiserver") {
				t.Errorf("wait %+v, want until %v; pending %q", d.AwaitingClients, tt.until, d.Pending)
			}
			want := fps(old, next)
			if !slices.Equal(pki.Fingerprints(d.Trust), want) || len(d.WriteMembers) != 3 {
				t.Fatalf("trust %v, %d Secrets rewritten; want both CAs back in all three", pki.Fingerprints(d.Trust), len(d.WriteMembers))
			}
			for _, w := range d.WriteMembers {
				if !slices.Equal(pki.Fingerprints(w.Secret.Trust), want) || len(w.Secret.Server.Chain) != 1 {
					t.Errorf("%s: bundle %v chain %d while waiting", w.Name, pki.Fingerprints(w.Secret.Trust), len(w.Secret.Server.Chain))
				}
			}
		})
	}
}

// With the user's Secrets (source Secret or CertManager) the client plane waits the same way
// before dropping the old CA, while the peer plane, which has no outside clients, goes on.
func TestUserDropOldCAWaitsForClients(t *testing.T) {
	a, b := mustCA(t, t0.Add(-day), caLife), mustCA(t, t0, caLife)
	u0, u1 := userTLS(t, a, a, t0.Add(-day)), userTLS(t, b, b, t0)
	f := userSteady(t, 3, u0, t0)
	f.User, f.ApproveDropOldCA = u1, ""
	run := func(until func(Decision) bool) Decision {
		t.Helper()
		for step := 0; step < 30; step++ {
			d := Decide(f)
			if d.Hold != "" {
				t.Fatalf("hold %q", d.Hold)
			}
			if until(d) {
				return d
			}
			landStep(&f, d)
			for i := range f.Members {
				f.Members[i].Pod.Served, f.Members[i].Pod.ServedPeer = f.Members[i].Secret.Server.Cert, f.Members[i].Secret.Peer.Cert
			}
		}
		t.Fatal("no end after 30 reconciles")
		return Decision{}
	}
	// Wait until the peer plane is done and only the client plane's drop is left.
	d := run(func(d Decision) bool { return d.AwaitingClients != nil && len(outdatedNames(d)) == 0 })
	if !d.AwaitingClients.Until.Equal(u1.Client.Leaf.Cert.NotBefore.Add(DefaultClientGrace)) || !mentions(d.Pending, "client plane", "kube-apiserver") {
		t.Errorf("wait %+v pending %q", d.AwaitingClients, d.Pending)
	}
	for _, m := range f.Members {
		if !slices.Contains(m.Pod.ClientPlaneTrust(), pki.Fingerprint(a.Cert)) || !slices.Equal(m.Pod.Trust, fps(b)) {
			t.Errorf("%s: client plane %v, peer plane %v; want the old CA kept on the client plane only", m.Name, m.Pod.ClientPlaneTrust(), m.Pod.Trust)
		}
	}
	f.ApproveDropOldCA = d.AwaitingClients.Approval
	run(noOp)
	for _, m := range f.Members {
		if !slices.Equal(m.Pod.ClientPlaneTrust(), fps(b)) {
			t.Errorf("%s: client plane %v after approval, want the new CA alone", m.Name, m.Pod.ClientPlaneTrust())
		}
	}
}
