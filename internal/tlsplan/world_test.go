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

// simPod is a running etcd as far as TLS goes: the trust it loaded at start (etcd never reloads
// it) and the leaves it presents (re-read on every handshake, from a volume the kubelet refreshes
// some time after the Secret changes).
type simPod struct {
	trust        []string
	server, peer *pki.Leaf
}

type simMember = memberOf[simPod]

// memberOf is a simulated member with its Secret and its Pod (nil when it has none); P is what a
// world models of a running Pod.
type memberOf[P any] struct {
	name    string
	secret  *MemberSecret
	written int // reconcile that last wrote the Secret
	pod     *P
}

func findMember[P any](t *testing.T, ms []*memberOf[P], name string) *memberOf[P] {
	i := slices.IndexFunc(ms, func(m *memberOf[P]) bool { return m.name == name })
	if i < 0 {
		t.Fatalf("no member %s", name)
	}
	return ms[i]
}

// cloneMembers copies members deeply enough for a what-if restart: Pods are copied, Secrets are
// replaced (never edited) by the worlds, so they are shared.
func cloneMembers[P any](ms []*memberOf[P]) []*memberOf[P] {
	var out []*memberOf[P]
	for _, m := range ms {
		mm := *m
		if m.pod != nil {
			p := *m.pod
			mm.pod = &p
		}
		out = append(out, &mm)
	}
	return out
}

// caPool resolves fingerprints to the CAs a world knows.
func caPool(cas map[string]*x509.Certificate, fps []string) []*x509.Certificate {
	var out []*x509.Certificate
	for _, fp := range fps {
		if c := cas[fp]; c != nil {
			out = append(out, c)
		}
	}
	return out
}

// world is a cluster, its Secrets and its application, driven by Decide the way the controller
// and the rollout engine drive it.
type world struct {
	t        *testing.T
	now      time.Time
	tick     time.Duration // time between reconciles
	lag      int           // reconciles until a written Secret reaches the Pods and the application
	caLife   time.Duration
	step     int
	ca, next *pki.CA
	cas      map[string]*x509.Certificate // every CA ever created, by fingerprint
	members  []*simMember
	rotate   bool // spec.tls.rotateCA asks for a rotation not yet started
	// approve sets spec.tls.approveDropOldCA to the running rotation's value; grace is
	// spec.tls.dropOldCAAfter.
	approve bool
	grace   time.Duration
	// frozen is a client that loaded the application Secret once and never reloads it (a
	// kube-apiserver); nil when there is none.
	frozen *Material

	app        *Material // the application client Secret
	appWritten int
	// appLeaf and appTrust are what the application has loaded.
	appLeaf  *pki.Leaf
	appTrust []*x509.Certificate

	restarts map[string]int
}

func newWorld(t *testing.T, n int, tick time.Duration, lag int, caLife time.Duration) *world {
	w := &world{t: t, now: t0, tick: tick, lag: lag, caLife: caLife, cas: map[string]*x509.Certificate{}, restarts: map[string]int{}}
	for _, name := range memberNames(n) {
		w.members = append(w.members, &simMember{name: name})
	}
	return w
}

func (w *world) facts() Facts {
	f := facts(w.now, w.ca, w.next)
	f.CALifetime, f.RotateRequested, f.ClientGrace = w.caLife, w.rotate, w.grace
	if w.approve && w.next != nil {
		f.ApproveDropOldCA = DropOldCAApproval([]*x509.Certificate{w.next.Cert})
	}
	for _, m := range w.members {
		mm := Member{Name: m.name, Secret: m.secret}
		if m.pod != nil {
			mm.Pod = &Pod{Trust: slices.Clone(m.pod.trust), Served: m.pod.server.Cert}
		}
		f.Members = append(f.Members, mm)
	}
	f.AppClient = w.app
	return f
}

// apply lands the decision's writes, CA first, as the controller does.
func (w *world) apply(d Decision) {
	if d.WriteCA != nil {
		w.ca, w.next = d.WriteCA.Current, d.WriteCA.Next
		for _, ca := range []*pki.CA{w.ca, w.next} {
			if ca != nil {
				w.cas[pki.Fingerprint(ca.Cert)] = ca.Cert
			}
		}
		if d.RotationStarted {
			w.rotate = false // status records spec.tls.rotateCA as handled
		}
	}
	for _, mw := range d.WriteMembers {
		m := w.member(mw.Name)
		s := mw.Secret
		m.secret, m.written = &s, w.step
	}
	if d.WriteAppClient != nil {
		w.app, w.appWritten = d.WriteAppClient, w.step
	}
}

// settle is the kubelet refreshing Secret volumes and the application reloading its Secret, lag
// reconciles after the write.
func (w *world) settle() {
	for _, m := range w.members {
		if m.pod != nil && w.step-m.written >= w.lag {
			m.pod.server, m.pod.peer = m.secret.Server, m.secret.Peer
		}
	}
	if w.app != nil && w.step-w.appWritten >= w.lag {
		w.appLeaf, w.appTrust = w.app.Leaf, w.app.Trust
	}
}

// start creates or restarts a member's Pod: it records and loads the trust its Secret holds now
// and presents the Secret's leaves.
func (w *world) start(name string) {
	m := w.member(name)
	m.pod = &simPod{trust: ParseTrust(FormatTrust(m.secret.Trust)), server: m.secret.Server, peer: m.secret.Peer}
}

func (w *world) member(name string) *simMember { return findMember(w.t, w.members, name) }

func (w *world) clone() *world {
	c := *w
	c.members = cloneMembers(w.members)
	return &c
}

func (w *world) pool(fps []string) []*x509.Certificate { return caPool(w.cas, fps) }

// broken lists every handshake that fails now or could fail before the next reconcile. Since the
// kubelet may refresh a volume at any moment, a member may present either the leaves it serves
// or those its Secret holds, and the application may use either Secret content it has seen.
func (w *world) broken() []string {
	var out []string
	fail := func(err error, format string, args ...any) {
		if err != nil {
			out = append(out, fmt.Sprintf(format, args...)+": "+err.Error())
		}
	}
	var appLeaves []*pki.Leaf
	var appTrusts [][]*x509.Certificate
	if w.app != nil {
		appLeaves, appTrusts = append(appLeaves, w.app.Leaf), append(appTrusts, w.app.Trust)
	}
	if w.appLeaf != nil {
		appLeaves, appTrusts = append(appLeaves, w.appLeaf), append(appTrusts, w.appTrust)
	}
	if w.frozen != nil {
		appLeaves, appTrusts = append(appLeaves, w.frozen.Leaf), append(appTrusts, w.frozen.Trust)
	}
	operator := pki.Bundle(certOf(w.ca), certOf(w.next))
	clientHost := resources.ClientServiceName(testCluster) + "." + testNamespace + ".svc"
	for _, a := range w.members {
		if a.pod == nil {
			continue
		}
		hostA := resources.MemberHost(testCluster, testNamespace, a.name)
		servers := []*pki.Leaf{a.pod.server, a.secret.Server}
		peers := []*pki.Leaf{a.pod.peer, a.secret.Peer}
		for _, b := range w.members {
			if b == a || b.pod == nil {
				continue
			}
			for _, p := range peers {
				// b dials a: b checks a as a server; a dials b: b checks a as a client.
				fail(verifyLeaf(p, w.pool(b.pod.trust), x509.ExtKeyUsageServerAuth, hostA, w.now), "%s rejects %s's peer leaf as server", b.name, a.name)
				fail(verifyLeaf(p, w.pool(b.pod.trust), x509.ExtKeyUsageClientAuth, "", w.now), "%s rejects %s's peer leaf as client", b.name, a.name)
			}
		}
		for _, s := range servers {
			for _, tr := range appTrusts {
				fail(verifyLeaf(s, tr, x509.ExtKeyUsageServerAuth, clientHost, w.now), "the application rejects %s", a.name)
			}
			fail(verifyLeaf(s, operator, x509.ExtKeyUsageServerAuth, hostA, w.now), "the operator rejects %s", a.name)
		}
		for _, l := range appLeaves {
			fail(verifyLeaf(l, w.pool(a.pod.trust), x509.ExtKeyUsageClientAuth, "", w.now), "%s rejects the application", a.name)
		}
		// The operator holds a client leaf of every CA in the CA Secret and offers the one the
		// member asks for.
		if len(w.pool(a.pod.trust)) == 0 || !slices.ContainsFunc(operator, func(c *x509.Certificate) bool { return slices.Contains(a.pod.trust, pki.Fingerprint(c)) }) {
			out = append(out, a.name+" rejects the operator")
		}
	}
	return out
}

func (w *world) requireIntact(when string) {
	w.t.Helper()
	if b := w.broken(); len(b) > 0 {
		w.t.Fatalf("reconcile %d, %s: %d handshakes fail:\n%s", w.step, when, len(b), strings.Join(b, "\n"))
	}
}

// reconcile is one turn of the controller and what follows until the next: volumes refresh,
// Decide runs (twice, as after a crash before any write, which must decide the same), the writes
// land, the rollout engine restarts one TrustOutdated member (highest ordinal first), and Pods
// are created for members that have material, unless held.
func (w *world) reconcile() Decision {
	w.t.Helper()
	w.step++
	w.now = w.now.Add(w.tick)
	w.settle()
	w.requireIntact("after volumes refreshed")
	f := w.facts()
	d := Decide(f)
	if a, b := summary(d, f), summary(Decide(f), f); a != b {
		w.t.Fatalf("reconcile %d: Decide on the same facts differs:\n%s\n%s", w.step, a, b)
	}
	w.apply(d)
	w.requireIntact("after the writes")
	out := outdatedNames(d)
	if d.Hold != "" && len(out) > 0 {
		w.t.Fatalf("reconcile %d: TrustOutdated %v while held (%s)", w.step, out, d.Hold)
	}
	for _, name := range out {
		// Any of them may be the one the engine picks: each restart must be safe on its own.
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
		if m.pod == nil && m.secret != nil && d.Hold == "" {
			w.start(m.name)
			w.requireIntact("after creating " + m.name)
		}
	}
	return d
}

func noOp(d Decision) bool {
	return d.WriteCA == nil && len(d.WriteMembers) == 0 && d.WriteAppClient == nil && len(outdatedNames(d)) == 0 &&
		d.Hold == "" && d.Pending == "" && d.Pass == pki.Done
}

// settleDown reconciles until a reconcile changes nothing.
func (w *world) settleDown(limit int) {
	w.t.Helper()
	for range limit {
		if noOp(w.reconcile()) {
			return
		}
	}
	w.t.Fatalf("no steady state after %d reconciles", limit)
}
