package tlsplan

import (
	"slices"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/pki"
)

// A new cluster comes up from nothing: the CA first, then every member's material and the
// application's, then Pods, and then nothing more to do.
func TestWorldBootstrap(t *testing.T) {
	w := newWorld(t, 3, time.Minute, 1, caLife)
	d := w.reconcile()
	if d.WriteCA == nil || d.Hold == "" {
		t.Fatalf("first reconcile: WriteCA=%v Hold=%q", d.WriteCA != nil, d.Hold)
	}
	if slices.ContainsFunc(w.members, func(m *simMember) bool { return m.pod != nil }) {
		t.Fatal("a Pod was created while the CA was being created")
	}
	w.settleDown(5)
	for _, m := range w.members {
		if m.pod == nil || !slices.Equal(m.pod.trust, fps(w.ca)) {
			t.Errorf("%s: Pod %v, want it trusting the CA", m.name, m.pod)
		}
	}
}

// The most important property of the package: a whole CA rotation of a 3-member cluster, driven
// only by Decide, the Secret writes, the kubelet's volume refresh and the rollout engine
// restarting one TrustOutdated member at a time, never leaves two parties unable to authenticate
// each other (world.reconcile checks every handshake after every event, and that every restart
// it is offered would be safe), goes through the passes in order, restarts each member exactly
// twice, and ends on the new CA alone.
func TestWorldRotation(t *testing.T) {
	for _, tt := range []struct {
		name   string
		tick   time.Duration
		lag    int
		caLife time.Duration
		// requested: spec.tls.rotateCA; otherwise the CA rotates when it falls due.
		requested bool
	}{
		{"requested, volumes refresh by the next reconcile", time.Minute, 1, caLife, true},
		{"requested, volumes lag two reconciles", time.Minute, 2, caLife, true},
		// Leaves fall due every three reconciles, so renewals land in every pass.
		{"requested, renewals fall due mid-rotation", 20 * day, 1, caLife, true},
		// A 150-day CA falls due on day 100 and rotates by itself.
		{"the CA falls due", 5 * day, 1, 150 * day, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, 3, tt.tick, tt.lag, tt.caLife)
			w.settleDown(5)
			old := w.ca
			w.rotate = tt.requested
			w.approve = true // waiting for clients has its own simulation (old_client_sim_test.go)

			var passes []pki.Pass
			var newCA *pki.CA
			for i := 0; ; i++ {
				if i > 80 {
					t.Fatalf("no end of the rotation after %d reconciles; passes %v", i, passes)
				}
				d := w.reconcile()
				if newCA == nil {
					if d.WriteCA == nil || d.WriteCA.Next == nil {
						if d.Pass != pki.Done || len(outdatedNames(d)) > 0 {
							t.Fatalf("reconcile %d: pass %s before any rotation started", w.step, d.Pass)
						}
						continue
					}
					newCA = d.WriteCA.Next
					if d.RotationStarted != tt.requested || len(d.WriteMembers) > 0 || d.WriteAppClient != nil {
						t.Fatalf("rotation start: RotationStarted=%v members=%v app=%v", d.RotationStarted, writtenNames(d), d.WriteAppClient != nil)
					}
				}
				if len(passes) == 0 || passes[len(passes)-1] != d.Pass {
					passes = append(passes, d.Pass)
				}
				if d.Hold != "" {
					t.Fatalf("reconcile %d: Hold %q in an orderly rotation", w.step, d.Hold)
				}
				if d.Pass == pki.SwapLeaves && len(outdatedNames(d)) > 0 {
					t.Errorf("reconcile %d: SwapLeaves restarts %v; new leaves need no restart", w.step, outdatedNames(d))
				}
				w.requireClientBundleFirst(old, newCA)
				if d.Pass != pki.Done && d.Pending == "" {
					t.Errorf("reconcile %d: %s with nothing Pending", w.step, d.Pass)
				}
				if w.next == nil && w.ca == newCA && noOp(d) {
					break
				}
			}
			if want := []pki.Pass{pki.WidenTrust, pki.SwapLeaves, pki.DropOldCA, pki.Done}; !slices.Equal(passes, want) {
				t.Errorf("passes %v, want %v", passes, want)
			}
			w.requireOnlyNew(newCA)
			for _, m := range w.members {
				if n := w.restarts[m.name]; n != 2 {
					t.Errorf("%s restarted %d times, want 2 (widen, drop)", m.name, n)
				}
			}
			// And it stays that way.
			requireNoOp(t, Decide(w.facts()))
		})
	}
}

// requireClientBundleFirst: the application's bundle names both CAs before any member Secret
// holds a new-signed leaf, so a member serving one is verified by the application.
func (w *world) requireClientBundleFirst(old, next *pki.CA) {
	w.t.Helper()
	if !slices.ContainsFunc(w.members, func(m *simMember) bool { return m.secret != nil && signedBy(m.secret.Server.Cert, next) }) {
		return
	}
	if w.ca != old {
		return // the rotation finished; the bundle narrows to the new CA
	}
	for what, bundle := range map[string][]string{"Secret": pki.Fingerprints(w.app.Trust), "loaded": pki.Fingerprints(w.appTrust)} {
		if !slices.Equal(bundle, fps(old, next)) {
			w.t.Fatalf("reconcile %d: a member Secret holds a new-signed leaf, but the application's %s bundle is %v", w.step, what, bundle)
		}
	}
}

// requireOnlyNew: the rotation left nothing of the old CA anywhere.
func (w *world) requireOnlyNew(next *pki.CA) {
	w.t.Helper()
	if w.ca != next || w.next != nil {
		w.t.Fatalf("CA Secret holds current=new:%v next=%v", w.ca == next, w.next != nil)
	}
	for _, m := range w.members {
		if !slices.Equal(m.pod.trust, fps(next)) || !slices.Equal(pki.Fingerprints(m.secret.Trust), fps(next)) {
			w.t.Errorf("%s: Pod trusts %v, Secret bundle %v, want the new CA alone", m.name, m.pod.trust, pki.Fingerprints(m.secret.Trust))
		}
		for _, l := range []*pki.Leaf{m.pod.server, m.pod.peer, m.secret.Server, m.secret.Peer} {
			if !signedBy(l.Cert, next) {
				w.t.Errorf("%s presents or holds a leaf not signed by the new CA", m.name)
			}
		}
	}
	if !signedBy(w.app.Leaf.Cert, next) || !slices.Equal(pki.Fingerprints(w.app.Trust), fps(next)) {
		w.t.Errorf("application client: new-signed %v, bundle %v", signedBy(w.app.Leaf.Cert, next), pki.Fingerprints(w.app.Trust))
	}
}
