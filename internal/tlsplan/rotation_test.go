package tlsplan

import (
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/pki"
)

// Starting a rotation writes the next CA next to the current one and nothing else: every later
// write (bundles, leaves) assumes the CA Secret already names both.
func TestDecideStartsRotation(t *testing.T) {
	for _, tt := range []struct {
		name      string
		caIssued  time.Time
		caLife    time.Duration
		requested bool
		why       string
	}{
		{"requested through spec.tls.rotateCA", t0.Add(-day), caLife, true, "spec.tls.rotateCA changed"},
		// A 150-day CA created 100 days ago is two thirds through its life.
		{"the CA is due for renewal", t0.Add(-100 * day), 150 * day, false, "the CA is due for renewal"},
		{"requested and due", t0.Add(-100 * day), 150 * day, true, "spec.tls.rotateCA changed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ca := mustCA(t, tt.caIssued, tt.caLife)
			f := steady(t, 3, ca, t0.Add(-day), t0)
			f.RotateRequested = tt.requested
			d := Decide(f)
			if d.WriteCA == nil || d.WriteCA.Current != ca || d.WriteCA.Next == nil {
				t.Fatalf("WriteCA = %+v, want {current, new next}", d.WriteCA)
			}
			next := d.WriteCA.Next.Cert
			if sameCert(next, ca.Cert) || !next.IsCA || !next.NotAfter.Equal(t0.Add(caLife)) {
				t.Errorf("next CA is not a fresh CA with CALifetime: %v..%v", next.NotBefore, next.NotAfter)
			}
			if d.RotationStarted != tt.requested {
				t.Errorf("RotationStarted = %v, want %v (only a requested rotation is recorded as handled)", d.RotationStarted, tt.requested)
			}
			if !strings.Contains(d.Pending, tt.why) {
				t.Errorf("Pending = %q, want it to say %q", d.Pending, tt.why)
			}
			if len(d.WriteMembers) > 0 || d.WriteAppClient != nil || len(outdatedNames(d)) > 0 || d.Hold != "" {
				t.Errorf("members=%v app=%v outdated=%v hold=%q: the CA write goes alone", writtenNames(d), d.WriteAppClient != nil, outdatedNames(d), d.Hold)
			}
			if d.Pass != pki.WidenTrust {
				t.Errorf("Pass = %s, want WidenTrust", d.Pass)
			}
		})
	}
}

// While a rotation is held (an adoption: the source's members trust only the source's CA, so
// leaves of a new CA would lock Steward's members out of the source), neither a request nor a due
// renewal starts one; the request is not recorded as handled, so it starts once the hold lifts,
// and the wait is said.
func TestDecideHoldsRotation(t *testing.T) {
	for _, requested := range []bool{false, true} {
		t.Run(fmt.Sprintf("requested=%v", requested), func(t *testing.T) {
			ca := mustCA(t, t0.Add(-100*day), 150*day) // due for renewal
			f := steady(t, 3, ca, t0.Add(-day), t0)
			f.RotateRequested = requested
			f.RotationHold = "the adoption is under way"
			d := Decide(f)
			if d.WriteCA != nil || d.RotationStarted || d.Pass == pki.WidenTrust {
				t.Fatalf("WriteCA=%+v started=%v pass=%s: a held rotation must not start", d.WriteCA, d.RotationStarted, d.Pass)
			}
			if !strings.Contains(d.Pending, "a CA rotation waits: the adoption is under way") {
				t.Errorf("Pending = %q, want the wait said", d.Pending)
			}
			f.RotationHold = ""
			if d := Decide(f); d.WriteCA == nil || d.WriteCA.Next == nil {
				t.Fatalf("the hold lifted, WriteCA = %+v: the rotation must start", d.WriteCA)
			}
		})
	}
}

// A request that comes while a rotation is under way does not start another one over it.
func TestDecideRotationRequestedDuringRotation(t *testing.T) {
	old, next := mustCA(t, t0.Add(-day), caLife), mustCA(t, t0, caLife)
	f := steady(t, 2, old, t0.Add(-day), t0.Add(time.Hour))
	f.NextCA, f.RotateRequested = next, true
	d := Decide(f)
	if d.WriteCA != nil || d.RotationStarted {
		t.Fatalf("WriteCA=%+v RotationStarted=%v: the next CA is already chosen", d.WriteCA, d.RotationStarted)
	}
	if d.Pass != pki.WidenTrust {
		t.Errorf("Pass = %s", d.Pass)
	}
	// Status shows both CAs while the rotation runs.
	var listed []string
	for _, c := range d.Certificates {
		listed = append(listed, c.Name)
	}
	if !slices.Contains(listed, "ca") || !slices.Contains(listed, "ca-next") {
		t.Errorf("certificates %v, want ca and ca-next", listed)
	}
}

func TestDecideNextCAErrorHolds(t *testing.T) {
	f := steady(t, 1, mustCA(t, t0, caLife), t0, t0.Add(day))
	f.RotateRequested, f.Cluster = true, ""
	if d := Decide(f); d.WriteCA != nil || !strings.Contains(d.Hold, "creating the next CA") {
		t.Errorf("WriteCA=%v Hold=%q", d.WriteCA != nil, d.Hold)
	}
}

// rotationFacts is a 3-member cluster part-way through rotating old to next, built from the
// per-member state: the CAs the Pod trusts, which CA signed the leaf it serves and the leaf its
// Secret holds, and the Secret's trust bundle. Codes: "o" old, "n" new, "on" both.
func rotationFacts(t *testing.T, old, next *pki.CA, now time.Time, state [3][4]string, app string) Facts {
	t.Helper()
	byCode := func(code string) []*pki.CA {
		var out []*pki.CA
		if strings.Contains(code, "o") {
			out = append(out, old)
		}
		if strings.Contains(code, "n") {
			out = append(out, next)
		}
		return out
	}
	certs := func(cas []*pki.CA) (out []*x509.Certificate) {
		for _, c := range cas {
			out = append(out, c.Cert)
		}
		return out
	}
	f := facts(now, old, next)
	// These cases are about deriving the pass from live state; waiting for clients before
	// DropOldCA has its own tests (approval_test.go).
	f.ApproveDropOldCA = DropOldCAApproval([]*x509.Certificate{next.Cert})
	cross, err := old.CrossSign(next.Cert)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range memberNames(3) {
		podTrust, served, secretLeaf, secretTrust := state[i][0], state[i][1], state[i][2], state[i][3]
		s := memberSecret(t, byCode(secretLeaf)[0], name, t0, certs(byCode(secretTrust))...)
		if secretLeaf == "n" { // as Steward writes new-signed leaves while the old CA is trusted
			s.Server, s.Peer = s.Server.WithChain(cross), s.Peer.WithChain(cross)
		}
		var pod *Pod
		if podTrust != "" {
			pod = &Pod{Trust: fps(byCode(podTrust)...), Served: s.Server.Cert}
			if served != secretLeaf {
				pod.Served = mustLeaf(t)(byCode(served)[0].IssueServer(names(name), t0, leafLife)).Cert
			}
		}
		f.Members = append(f.Members, Member{Name: name, Secret: s, Pod: pod})
	}
	f.AppClient = appClient(t, byCode(app[:1])[0], t0, certs(byCode(app[1:]))...)
	return f
}

// A rotation interrupted anywhere continues from the live state: the pass, who restarts and what
// is written follow from what Pods trust and serve, not from anything remembered.
func TestDecideRotationFromLiveState(t *testing.T) {
	old, next := mustCA(t, t0.Add(-day), caLife), mustCA(t, t0, caLife)
	now := t0.Add(time.Hour)
	for _, tt := range []struct {
		name string
		// per member: Pod trust, served leaf's CA, Secret leaf's CA, Secret trust
		state  [3][4]string
		app    string // client leaf CA, then its trust
		pass   pki.Pass
		writes []string
		out    []string
		signer *pki.CA
		finish bool
	}{
		{"crashed right after the CA write", [3][4]string{{"o", "o", "o", "o"}, {"o", "o", "o", "o"}, {"o", "o", "o", "o"}}, "oo",
			pki.WidenTrust, []string{"etcd-0", "etcd-1", "etcd-2"}, []string{"etcd-0", "etcd-1", "etcd-2"}, old, false},
		{"one member widened", [3][4]string{{"on", "o", "o", "on"}, {"o", "o", "o", "on"}, {"o", "o", "o", "on"}}, "oon",
			pki.WidenTrust, nil, []string{"etcd-1", "etcd-2"}, old, false},
		{"all widened, leaves not swapped", [3][4]string{{"on", "o", "o", "on"}, {"on", "o", "o", "on"}, {"on", "o", "o", "on"}}, "oon",
			pki.SwapLeaves, []string{"etcd-0", "etcd-1", "etcd-2"}, nil, next, false},
		{"leaves half swapped", [3][4]string{{"on", "n", "n", "on"}, {"on", "o", "n", "on"}, {"on", "o", "o", "on"}}, "non",
			pki.SwapLeaves, []string{"etcd-2"}, nil, next, false},
		{"only the client still old-signed", [3][4]string{{"on", "n", "n", "on"}, {"on", "n", "n", "on"}, {"on", "n", "n", "on"}}, "oon",
			pki.SwapLeaves, nil, nil, next, false},
		{"swapped, no restart yet", [3][4]string{{"on", "n", "n", "on"}, {"on", "n", "n", "on"}, {"on", "n", "n", "on"}}, "non",
			pki.DropOldCA, []string{"etcd-0", "etcd-1", "etcd-2"}, []string{"etcd-0", "etcd-1", "etcd-2"}, next, false},
		{"one member dropped the old CA", [3][4]string{{"n", "n", "n", "n"}, {"on", "n", "n", "n"}, {"on", "n", "n", "n"}}, "non",
			pki.DropOldCA, nil, []string{"etcd-1", "etcd-2"}, next, false},
		{"a member without a Pod", [3][4]string{{"n", "n", "n", "n"}, {"", "", "n", "n"}, {"on", "n", "n", "n"}}, "non",
			pki.DropOldCA, nil, []string{"etcd-2"}, next, false},
		{"every member on the new CA alone", [3][4]string{{"n", "n", "n", "n"}, {"n", "n", "n", "n"}, {"n", "n", "n", "n"}}, "non",
			pki.Done, nil, nil, next, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := rotationFacts(t, old, next, now, tt.state, tt.app)
			d := Decide(f)
			if d.Hold != "" {
				t.Fatalf("Hold = %q", d.Hold)
			}
			if d.Pass != tt.pass {
				t.Errorf("Pass = %s, want %s", d.Pass, tt.pass)
			}
			if got := writtenNames(d); !slices.Equal(got, tt.writes) {
				t.Errorf("writes %v, want %v", got, tt.writes)
			}
			if got := outdatedNames(d); !slices.Equal(got, tt.out) {
				t.Errorf("TrustOutdated %v, want %v", got, tt.out)
			}
			if d.Signer != tt.signer {
				t.Errorf("signer is the %s CA", map[bool]string{true: "old", false: "new"}[d.Signer == old])
			}
			if tt.finish != (d.WriteCA != nil) {
				t.Fatalf("WriteCA = %+v, want a finishing write: %v", d.WriteCA, tt.finish)
			}
			if tt.finish && (d.WriteCA.Current != next || d.WriteCA.Next != nil || !strings.Contains(d.Pending, "finishing")) {
				t.Errorf("finish: WriteCA=%+v Pending=%q", d.WriteCA, d.Pending)
			}
			if tt.pass != pki.Done && d.Pending == "" {
				t.Error("Pending is empty in the middle of a rotation")
			}
			for _, w := range d.WriteMembers {
				if !signedBy(w.Secret.Server.Cert, tt.signer) && tt.signer == next {
					t.Errorf("%s written with an old-signed leaf during %s", w.Name, d.Pass)
				}
				if !slices.Equal(pki.Fingerprints(w.Secret.Trust), pki.Fingerprints(d.Trust)) {
					t.Errorf("%s written with another bundle than the pass's", w.Name)
				}
			}
			// The same facts again (a crash before the writes landed) decide the same.
			if a, b := summary(d, f), summary(Decide(f), f); a != b {
				t.Errorf("re-running Decide differs:\n%s\n%s", a, b)
			}
		})
	}
}

// summary is a decision with the parts a fresh issuance randomizes (keys, serials, a new CA)
// reduced to what they are for, so that two decisions on one set of facts compare equal.
func summary(d Decision, f Facts) string {
	var b strings.Builder
	if d.WriteCA != nil {
		role := func(ca *pki.CA) string {
			switch ca {
			case nil:
				return "none"
			case f.CA:
				return "current"
			case f.NextCA:
				return "next"
			}
			return "fresh"
		}
		fmt.Fprintf(&b, "ca current=%s next=%s started=%v\n", role(d.WriteCA.Current), role(d.WriteCA.Next), d.RotationStarted)
	}
	for _, w := range d.WriteMembers {
		fmt.Fprintf(&b, "write %s %q trust=%v\n", w.Name, w.Why, pki.Fingerprints(w.Secret.Trust))
	}
	if a := d.WriteAppClient; a != nil {
		kept := f.AppClient != nil && a.Leaf == f.AppClient.Leaf
		fmt.Fprintf(&b, "app kept=%v trust=%v\n", kept, pki.Fingerprints(a.Trust))
	}
	fmt.Fprintf(&b, "outdated=%v pass=%s hold=%q pending=%q expiring=%q trust=%v\n", outdatedNames(d), d.Pass, d.Hold, d.Pending, d.Expiring, pki.Fingerprints(d.Trust))
	return b.String()
}

// Every rotation pass publishes both CAs to the application from its start until it is done, and
// the bundle narrows once the old CA is gone.
func TestDecideAppClientBundleDuringRotation(t *testing.T) {
	old, next := mustCA(t, t0.Add(-day), caLife), mustCA(t, t0, caLife)
	f := rotationFacts(t, old, next, t0.Add(time.Hour), [3][4]string{{"o", "o", "o", "o"}, {"o", "o", "o", "o"}, {"o", "o", "o", "o"}}, "oo")
	d := Decide(f)
	if d.Pass != pki.WidenTrust || d.WriteAppClient == nil {
		t.Fatalf("pass %s, app written %v", d.Pass, d.WriteAppClient != nil)
	}
	if got := pki.Fingerprints(d.WriteAppClient.Trust); !slices.Equal(got, fps(old, next)) {
		t.Errorf("client trust in WidenTrust %v, want both CAs", got)
	}
	if d.WriteAppClient.Leaf != f.AppClient.Leaf {
		t.Error("the client leaf is re-issued in WidenTrust; it must stay old-signed until members trust new")
	}
	// It keeps the old CA through DropOldCA (an application that reloads late still verifies) and
	// restores it if the Secret lost it.
	for _, app := range []string{"non", "nn"} {
		f = rotationFacts(t, old, next, t0.Add(time.Hour), [3][4]string{{"n", "n", "n", "n"}, {"on", "n", "n", "n"}, {"on", "n", "n", "n"}}, app)
		d = Decide(f)
		bundle := f.AppClient.Trust
		if d.WriteAppClient != nil {
			bundle = d.WriteAppClient.Trust
		}
		if d.Pass != pki.DropOldCA || !slices.Equal(pki.Fingerprints(bundle), fps(old, next)) {
			t.Errorf("%s with client Secret %q: client bundle %v, want both CAs", d.Pass, app, pki.Fingerprints(bundle))
		}
	}
	// After the finish the CA Secret holds the new CA alone: the bundle drops the old one.
	f = rotationFacts(t, old, next, t0.Add(time.Hour), [3][4]string{{"n", "n", "n", "n"}, {"n", "n", "n", "n"}, {"n", "n", "n", "n"}}, "non")
	f.CA, f.NextCA = next, nil
	d = Decide(f)
	if d.WriteAppClient == nil || !slices.Equal(pki.Fingerprints(d.WriteAppClient.Trust), fps(next)) || d.WriteAppClient.Leaf != f.AppClient.Leaf {
		t.Fatalf("after the rotation the client Secret keeps its leaf and trusts the new CA alone: %+v", d.WriteAppClient)
	}
	if len(outdatedNames(d)) > 0 || d.Hold != "" {
		t.Errorf("outdated %v hold %q", outdatedNames(d), d.Hold)
	}
	// Members only stop presenting the cross-signed CA: same leaves, no restart.
	for i, w := range d.WriteMembers {
		if len(w.Secret.Server.Chain)+len(w.Secret.Peer.Chain) > 0 || w.Secret.Server.Cert != f.Members[i].Secret.Server.Cert {
			t.Errorf("%s: written with chain %d/%d or another leaf", w.Name, len(w.Secret.Server.Chain), len(w.Secret.Peer.Chain))
		}
	}
}
