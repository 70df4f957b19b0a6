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

// userPod is a running etcd on user Secrets: the trust each plane loaded at start (etcd never
// reloads it) and its Secret volume as the kubelet last refreshed it, whose leaves it presents.
type userPod struct {
	peerTrust, clientTrust []string
	vol                    MemberSecret
}

type userSimMember = memberOf[userPod]

// userWorld is a cluster on the user's Secrets driven by Decide the way the controller and the
// rollout engine drive it: writes land, volumes refresh lag reconciles later, one TrustOutdated
// member restarts per reconcile and loads its Secret's bundles.
type userWorld struct {
	t        *testing.T
	now      time.Time
	lag      int
	step     int
	user     *UserTLS
	members  []*userSimMember
	cas      map[string]*x509.Certificate // every CA the user ever gave, by fingerprint
	restarts map[string]int
	// peerCAs and clientCAs are the CAs the user ever gave each plane: a plane's bundle may hold
	// no other.
	peerCAs, clientCAs map[string]bool
	// verified memoizes verify: the same handshakes are checked many times per reconcile.
	verified map[string]error
}

func newUserWorld(t *testing.T, n, lag int, u *UserTLS) *userWorld {
	w := &userWorld{t: t, now: t0, lag: lag, cas: map[string]*x509.Certificate{}, restarts: map[string]int{},
		peerCAs: map[string]bool{}, clientCAs: map[string]bool{}, verified: map[string]error{}}
	for _, name := range memberNames(n) {
		w.members = append(w.members, &userSimMember{name: name})
	}
	w.setUser(u)
	return w
}

// setUser is the user editing their Secrets.
func (w *userWorld) setUser(u *UserTLS) {
	w.user = u
	for _, c := range u.Peer.Trust {
		w.cas[pki.Fingerprint(c)], w.peerCAs[pki.Fingerprint(c)] = c, true
	}
	for _, c := range u.Client.Trust {
		w.cas[pki.Fingerprint(c)], w.clientCAs[pki.Fingerprint(c)] = c, true
	}
}

func (w *userWorld) facts() Facts {
	f := userFacts(w.now, w.user)
	for _, m := range w.members {
		mm := Member{Name: m.name, Secret: m.secret}
		if m.pod != nil {
			mm.Pod = &Pod{Trust: slices.Clone(m.pod.peerTrust), ClientTrust: slices.Clone(m.pod.clientTrust),
				Served: m.pod.vol.Server.Cert, ServedPeer: m.pod.vol.Peer.Cert}
		}
		f.Members = append(f.Members, mm)
	}
	return f
}

func (w *userWorld) apply(d Decision) {
	for _, mw := range d.WriteMembers {
		m := w.member(mw.Name)
		s := readBack(mw.Secret)
		m.secret, m.written = &s, w.step
	}
}

func (w *userWorld) settle() {
	for _, m := range w.members {
		if m.pod != nil && w.step-m.written >= w.lag {
			m.pod.vol = *m.secret
		}
	}
}

// start creates or restarts a member's Pod, recording the trust annotation as the controller
// does and loading its Secret.
func (w *userWorld) start(name string) {
	m := w.member(name)
	peer, client := ParsePlaneTrust(FormatPlaneTrust(m.secret.Trust, m.secret.ClientBundle()))
	m.pod = &userPod{peerTrust: peer, clientTrust: client, vol: *m.secret}
}

func (w *userWorld) member(name string) *userSimMember { return findMember(w.t, w.members, name) }

func (w *userWorld) clone() *userWorld {
	c := *w
	c.members = cloneMembers(w.members)
	return &c
}

func (w *userWorld) pool(fps []string) []*x509.Certificate { return caPool(w.cas, fps) }

// broken lists every handshake that fails now or could before the next reconcile (the kubelet
// may refresh a volume at any moment, so a member may present its volume's leaves or its
// Secret's):
//   - peers: every member accepts every other member's peer leaf, as a server and as a client,
//     with the trust its Pod loaded;
//   - clients: every member's server leaf is accepted by the clients' bundles (each Pod's loaded
//     client-plane trust, each volume's and each Secret's client bundle), and as a client
//     certificate (etcd's gateway) by every Pod's client-plane trust;
//   - the operator (userCredentials) reaches every member: it trusts the user's client ca.crt and
//     every Secret's client bundle, and presents the user's client leaf or a Secret's server leaf.
func (w *userWorld) broken() []string {
	var out []string
	fail := func(err error, format string, args ...any) {
		if err != nil {
			out = append(out, fmt.Sprintf(format, args...)+": "+err.Error())
		}
	}
	clientHost := resources.ClientServiceName(testCluster) + "." + testNamespace + ".svc"
	var bundles [][]*x509.Certificate
	opRoots := slices.Clone(w.user.Client.Trust)
	opCerts := []*pki.Leaf{w.user.Client.Leaf}
	for _, m := range w.members {
		if m.secret != nil {
			bundles = append(bundles, m.secret.ClientBundle())
			opRoots, opCerts = append(opRoots, m.secret.ClientBundle()...), append(opCerts, m.secret.Server)
		}
		if m.pod != nil {
			bundles = append(bundles, w.pool(m.pod.clientTrust), m.pod.vol.ClientBundle())
		}
	}
	for _, a := range w.members {
		if a.pod == nil {
			continue
		}
		hostA := resources.MemberHost(testCluster, testNamespace, a.name)
		for _, b := range w.members {
			if b.pod == nil {
				continue
			}
			for _, p := range []*pki.Leaf{a.pod.vol.Peer, a.secret.Peer} {
				if b != a {
					fail(w.verify(p.Cert, w.pool(b.pod.peerTrust), x509.ExtKeyUsageServerAuth, hostA), "%s rejects %s's peer leaf as server", b.name, a.name)
					fail(w.verify(p.Cert, w.pool(b.pod.peerTrust), x509.ExtKeyUsageClientAuth, ""), "%s rejects %s's peer leaf as client", b.name, a.name)
				}
			}
			for _, s := range []*pki.Leaf{a.pod.vol.Server, a.secret.Server} {
				fail(w.verify(s.Cert, w.pool(b.pod.clientTrust), x509.ExtKeyUsageClientAuth, ""), "%s rejects %s's server leaf as a client", b.name, a.name)
			}
		}
		for _, s := range []*pki.Leaf{a.pod.vol.Server, a.secret.Server} {
			for i, bundle := range bundles {
				fail(w.verify(s.Cert, bundle, x509.ExtKeyUsageServerAuth, clientHost), "client bundle %d (%s) rejects %s", i, fps8(bundle), a.name)
			}
			fail(w.verify(s.Cert, opRoots, x509.ExtKeyUsageServerAuth, hostA), "the operator rejects %s", a.name)
		}
		if !slices.ContainsFunc(opCerts, func(l *pki.Leaf) bool {
			return w.verify(l.Cert, w.pool(a.pod.clientTrust), x509.ExtKeyUsageClientAuth, "") == nil
		}) {
			out = append(out, a.name+" rejects every certificate the operator holds")
		}
	}
	return out
}

// verify is helpers_test's verify, memoized (the clock only moves by minutes here, far from any
// certificate's validity bounds).
func (w *userWorld) verify(c *x509.Certificate, pool []*x509.Certificate, u x509.ExtKeyUsage, host string) error {
	key := fmt.Sprintf("%s|%s|%d|%s", pki.Fingerprint(c), strings.Join(pki.Fingerprints(pool), ","), u, host)
	err, ok := w.verified[key]
	if !ok {
		err = verify(c, pool, u, host, w.now)
		w.verified[key] = err
	}
	return err
}

func (w *userWorld) requireIntact(when string) {
	w.t.Helper()
	if b := w.broken(); len(b) > 0 {
		w.t.Fatalf("reconcile %d, %s: %d handshakes fail:\n%s", w.step, when, len(b), strings.Join(b, "\n"))
	}
}

// requirePlanesApart: a plane's bundles only ever hold CAs the user gave that plane.
func (w *userWorld) requirePlanesApart(d Decision) {
	w.t.Helper()
	for _, mw := range d.WriteMembers {
		for plane, c := range map[string]struct {
			bundle  []*x509.Certificate
			allowed map[string]bool
		}{"peer": {mw.Secret.Trust, w.peerCAs}, "client": {mw.Secret.ClientBundle(), w.clientCAs}} {
			for _, fp := range pki.Fingerprints(c.bundle) {
				if !c.allowed[fp] {
					w.t.Errorf("reconcile %d: %s's %s bundle %s holds %s, a CA the user never gave the %s plane",
						w.step, mw.Name, plane, fps8(c.bundle), fp[:8], plane)
				}
			}
		}
	}
}

// reconcile is one turn of the controller and what follows until the next: volumes refresh,
// Decide runs (twice: a crash before any write must decide the same; and again after only the
// first write landed, which must decide the rest), the writes land, the rollout engine restarts
// one TrustOutdated member (highest ordinal first, after checking that each it is offered would
// be safe), and Pods are created for members that have a Secret.
func (w *userWorld) reconcile() Decision {
	w.t.Helper()
	w.step++
	w.now = w.now.Add(time.Minute)
	w.settle()
	w.requireIntact("after volumes refreshed")
	f := w.facts()
	d := Decide(f)
	if again := Decide(f); userSummary(again) != userSummary(d) {
		w.t.Fatalf("reconcile %d: Decide on the same facts differs:\n%s\n%s", w.step, userSummary(d), userSummary(again))
	}
	if len(d.WriteMembers) > 1 {
		c := w.clone()
		c.apply(Decision{WriteMembers: d.WriteMembers[:1]})
		after := Decide(c.facts())
		var want, got []string
		for _, mw := range d.WriteMembers[1:] {
			want = append(want, writeLine(mw))
		}
		for _, mw := range after.WriteMembers {
			got = append(got, writeLine(mw))
		}
		if !slices.Equal(got, want) || !slices.Equal(outdatedNames(after), outdatedNames(d)) || after.Pass != d.Pass {
			w.t.Fatalf("reconcile %d: after a crash past the first write Decide says\n%s\nwant the rest of\n%s", w.step, userSummary(after), userSummary(d))
		}
	}
	if d.Hold != "" || d.WriteCA != nil || d.WriteAppClient != nil {
		w.t.Fatalf("reconcile %d: user Secrets: %s", w.step, userSummary(d))
	}
	w.requirePlanesApart(d)
	w.apply(d)
	w.requireIntact("after the writes")
	out := outdatedNames(d)
	for _, name := range out {
		c := w.clone()
		c.start(name)
		if b := c.broken(); len(b) > 0 {
			w.t.Fatalf("reconcile %d: restarting %s (TrustOutdated in %s) would break:\n%s", w.step, name, d.Pass, strings.Join(b, "\n"))
		}
	}
	if len(out) > 0 {
		name := out[len(out)-1]
		w.start(name)
		w.restarts[name]++
		w.requireIntact("after restarting " + name)
	}
	for _, m := range w.members {
		if m.pod == nil && m.secret != nil {
			w.start(m.name)
			w.requireIntact("after creating " + m.name)
		}
	}
	return d
}

func (w *userWorld) settleDown(limit int) {
	w.t.Helper()
	for range limit {
		if noOp(w.reconcile()) {
			return
		}
	}
	w.t.Fatalf("no steady state after %d reconciles", limit)
}

// runsOn reports whether every member's Secret, volume and loaded trust are exactly u's.
func (w *userWorld) runsOn(u *UserTLS) bool {
	want := userSecret(u)
	for _, m := range w.members {
		if m.pod == nil || !sameSecret(m.secret, want) || !sameSecret(&m.pod.vol, want) ||
			!slices.Equal(m.pod.peerTrust, pki.Fingerprints(u.Peer.Trust)) || !slices.Equal(m.pod.clientTrust, pki.Fingerprints(u.Client.Trust)) {
			return false
		}
	}
	return true
}

// The user puts a new CA in their Secrets. For a 3-member cluster, driven only by Decide, the
// writes, the kubelet's lagging volume refresh and the rollout engine restarting one
// TrustOutdated member per reconcile: no handshake ever fails (nothing presents a leaf of the new
// ca.crt to a party that does not trust it yet), the passes are WidenTrust, SwapLeaves,
// DropOldCA, each member restarts exactly twice, and the cluster ends on the user's material
// alone, after which Decide is a no-op.
func TestUserWorldCARotation(t *testing.T) {
	a, b, c, d := mustCA(t, t0.Add(-day), caLife), mustCA(t, t0, caLife), mustCA(t, t0, caLife), mustCA(t, t0.Add(-day), caLife)
	for _, tt := range []struct {
		name   string
		lag    int
		before func(t *testing.T) *UserTLS
		after  func(t *testing.T, before *UserTLS) *UserTLS
		// join adds a member once the rotation started.
		join bool
		// peerUntouched: only the client plane changes; the peer plane must never move.
		peerUntouched bool
	}{
		{name: "one CA for both planes, replaced by another; volumes refresh by the next reconcile", lag: 1,
			before: func(t *testing.T) *UserTLS { return userTLS(t, a, a, t0.Add(-day)) },
			after:  func(t *testing.T, _ *UserTLS) *UserTLS { return userTLS(t, b, b, t0) }},
		{name: "one CA for both planes, replaced by another; volumes lag two reconciles", lag: 2,
			before: func(t *testing.T) *UserTLS { return userTLS(t, a, a, t0.Add(-day)) },
			after:  func(t *testing.T, _ *UserTLS) *UserTLS { return userTLS(t, b, b, t0) }},
		{name: "one CA for both planes, replaced by a CA per plane", lag: 1,
			before: func(t *testing.T) *UserTLS { return userTLS(t, a, a, t0.Add(-day)) },
			after:  func(t *testing.T, _ *UserTLS) *UserTLS { return userTLS(t, b, c, t0) }},
		{name: "a CA per plane, the peer plane's replaced", lag: 1,
			before: func(t *testing.T) *UserTLS { return userTLS(t, a, d, t0.Add(-day)) },
			after: func(t *testing.T, u *UserTLS) *UserTLS {
				return &UserTLS{Peer: userTLS(t, b, b, t0).Peer, Client: u.Client}
			}},
		{name: "only the client plane's CA changes", lag: 1, peerUntouched: true,
			before: func(t *testing.T) *UserTLS { return userTLS(t, a, a, t0.Add(-day)) },
			after: func(t *testing.T, u *UserTLS) *UserTLS {
				return &UserTLS{Peer: u.Peer, Client: userTLS(t, c, c, t0).Client}
			}},
		{name: "a member joins during WidenTrust", lag: 1, join: true,
			before: func(t *testing.T) *UserTLS { return userTLS(t, a, a, t0.Add(-day)) },
			after:  func(t *testing.T, _ *UserTLS) *UserTLS { return userTLS(t, b, b, t0) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u0 := tt.before(t)
			w := newUserWorld(t, 3, tt.lag, u0)
			w.settleDown(6) // a new cluster comes up on the user's material
			if !w.runsOn(u0) || len(w.restarts) > 0 {
				t.Fatalf("bootstrap: runs on the user's material %v, restarts %v", w.runsOn(u0), w.restarts)
			}
			u1 := tt.after(t, u0)
			w.setUser(u1)

			var passes []pki.Pass
			joined := ""
			for i := 0; ; i++ {
				if i > 40 {
					t.Fatalf("no end of the rotation after %d reconciles; passes %v", i, passes)
				}
				d := w.reconcile()
				if len(passes) == 0 || passes[len(passes)-1] != d.Pass {
					passes = append(passes, d.Pass)
				}
				if d.Pass != pki.Done && d.Pending == "" {
					t.Errorf("reconcile %d: %s with nothing Pending", w.step, d.Pass)
				}
				if d.Pass == pki.SwapLeaves && len(outdatedNames(d)) > 0 {
					t.Errorf("reconcile %d: SwapLeaves restarts %v; a new leaf needs no restart", w.step, outdatedNames(d))
				}
				if tt.peerUntouched {
					for _, m := range w.members {
						if !sameCert(m.secret.Peer.Cert, u0.Peer.Leaf.Cert) || fps8(m.secret.Trust) != fps8(u0.Peer.Trust) ||
							!slices.Equal(m.pod.peerTrust, pki.Fingerprints(u0.Peer.Trust)) {
							t.Fatalf("reconcile %d: %s's peer plane moved (leaf %s, bundle %s, Pod %v)", w.step, m.name, leafFP(m.secret.Peer), fps8(m.secret.Trust), m.pod.peerTrust)
						}
					}
				}
				if tt.join && joined == "" && d.Pass == pki.WidenTrust {
					joined = "etcd-3"
					w.members = append(w.members, &userSimMember{name: joined})
				}
				if noOp(d) && w.runsOn(u1) {
					break
				}
			}
			if want := []pki.Pass{pki.WidenTrust, pki.SwapLeaves, pki.DropOldCA, pki.Done}; !slices.Equal(passes, want) {
				t.Errorf("passes %v, want %v", passes, want)
			}
			for _, m := range w.members {
				want := 2 // widen, drop
				if m.name == joined {
					want = 1 // it started on the widened bundles
				}
				if n := w.restarts[m.name]; n != want {
					t.Errorf("%s restarted %d times, want %d", m.name, n, want)
				}
				requireUserMaterial(t, m.name, m.secret, u1)
			}
			d := Decide(w.facts())
			requireNoOp(t, d)
			requireNoRenewAt(t, d)
		})
	}
}
