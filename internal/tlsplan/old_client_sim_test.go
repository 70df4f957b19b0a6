package tlsplan

import (
	"crypto/x509"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/internal/resources"
)

// A client that loads its files once (a kube-apiserver with --etcd-cafile, --etcd-certfile and
// --etcd-keyfile) trusts only the old CA and presents an old-signed leaf until it restarts. Through
// the whole rotation up to the approval, or the end of the grace, it authenticates with real x509
// verification against every member (world.broken checks it after every event); the old CA is
// not dropped before; once it restarts from the application Secret and the rotation is approved
// or the grace ends, the rotation finishes and it keeps working.
func TestWorldRotationClientThatNeverReloads(t *testing.T) {
	const grace = 2 * time.Hour
	for _, tt := range []struct {
		name    string
		approve bool // approve after the restart; otherwise the grace runs out
	}{
		{"approved after the client restarted", true},
		{"the grace runs out", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, 3, time.Minute, 1, caLife)
			w.grace = grace
			w.settleDown(5)
			old := w.ca
			frozen := *w.app
			w.frozen, w.rotate = &frozen, true

			var passes []pki.Pass
			var waiting *ClientWait
			for i := 0; waiting == nil; i++ {
				if i > 40 {
					t.Fatalf("no wait for clients after %d reconciles; passes %v", i, passes)
				}
				d := w.reconcile()
				if len(passes) == 0 || passes[len(passes)-1] != d.Pass {
					passes = append(passes, d.Pass)
				}
				if d.Pass == pki.SwapLeaves || d.Pass == pki.DropOldCA {
					w.requireOldOnlyPeersVerify(old)
				}
				waiting = d.AwaitingClients
			}
			if want := []pki.Pass{pki.WidenTrust, pki.SwapLeaves, pki.DropOldCA}; !slices.Equal(passes, want) {
				t.Errorf("passes %v, want %v", passes, want)
			}
			if waiting.Approval != DropOldCAApproval([]*x509.Certificate{w.next.Cert}) || !strings.Contains(waiting.Message, waiting.Approval) ||
				!mentions(waiting.Message, "kube-apiserver", "restart", "approve", "ca.crt", "client certificate") {
				t.Errorf("wait %+v does not say what to do", waiting)
			}
			// The grace counts from the application's new-signed certificate.
			since := w.app.Leaf.Cert.NotBefore.Add(pki.Backdate)
			if !signedBy(w.app.Leaf.Cert, w.next) || !waiting.Until.Equal(since.Add(grace)) {
				t.Errorf("grace until %v, want %v after the new client certificate (%v)", waiting.Until, grace, since)
			}
			// It waits, keeping the old CA everywhere, as long as nobody approves and the grace runs.
			for waits := 1; w.now.Add(w.tick).Before(waiting.Until); waits++ {
				d := w.reconcile()
				if d.Pass != pki.DropOldCA || d.AwaitingClients == nil || len(outdatedNames(d)) > 0 {
					t.Fatalf("reconcile %d (%v before the grace ends): pass %s, awaiting %v, restarts %v", w.step,
						waiting.Until.Sub(w.now), d.Pass, d.AwaitingClients != nil, outdatedNames(d))
				}
				w.requireOldTrusted(old)
				if tt.approve && waits == 3 {
					break
				}
				w.now = w.now.Add(10 * time.Minute) // reach the grace in fewer reconciles
			}
			// The client restarts with the Secret's files: both CAs, the new-signed certificate.
			restarted := *w.app
			w.frozen = &restarted
			w.approve = tt.approve
			for i := 0; ; i++ {
				if i > 40 {
					t.Fatal("no end of the rotation after the approval or the grace")
				}
				d := w.reconcile()
				if w.next == nil && noOp(d) {
					break
				}
			}
			w.requireOnlyNew(w.ca)
			if w.ca == old {
				t.Fatal("the rotation ended on the old CA")
			}
		})
	}
}

// requireOldOnlyPeersVerify: a member that restarted with the old bundle alone (peer plane) still
// verifies every member's peer and server leaves through the cross-signed CA they present.
func (w *world) requireOldOnlyPeersVerify(old *pki.CA) {
	w.t.Helper()
	for _, m := range w.members {
		host := resources.MemberHost(testCluster, testNamespace, m.name)
		for _, l := range []*pki.Leaf{m.secret.Peer, m.pod.peer, m.secret.Server, m.pod.server} {
			if err := verifyLeaf(l, []*x509.Certificate{old.Cert}, x509.ExtKeyUsageServerAuth, host, w.now); err != nil {
				w.t.Fatalf("reconcile %d: a party trusting only the old CA refuses %s: %v", w.step, m.name, err)
			}
		}
	}
}

// requireOldTrusted: every member runs, and would restart, trusting the old CA.
func (w *world) requireOldTrusted(old *pki.CA) {
	w.t.Helper()
	fp := pki.Fingerprint(old.Cert)
	for _, m := range w.members {
		if !slices.Contains(m.pod.trust, fp) || !pki.Contains(m.secret.Trust, old.Cert) {
			w.t.Fatalf("reconcile %d: %s dropped the old CA before approval or the grace (Pod %v, Secret %v)", w.step, m.name,
				m.pod.trust, pki.Fingerprints(m.secret.Trust))
		}
	}
}
