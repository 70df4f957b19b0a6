package tlsplan

import (
	"crypto/x509"
	"slices"
	"strings"
	"testing"
	"time"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/pki"
)

// A new cluster has no CA: the first reconcile creates it and holds everything else, since no
// member may start before its material exists and the material needs the CA Secret written first.
func TestDecideCreatesCAFirst(t *testing.T) {
	f := facts(t0, nil, nil)
	for _, name := range memberNames(3) {
		f.Members = append(f.Members, Member{Name: name})
	}
	d := Decide(f)
	if d.WriteCA == nil || d.WriteCA.Current == nil {
		t.Fatalf("no CA written: %+v", d)
	}
	if d.WriteCA.Next != nil {
		t.Error("a fresh cluster starts no rotation")
	}
	ca := d.WriteCA.Current.Cert
	if !ca.IsCA || ca.NotBefore.After(t0) || !ca.NotAfter.Equal(t0.Add(caLife)) {
		t.Errorf("CA %v..%v IsCA=%v, want a CA valid from t0 for CALifetime", ca.NotBefore, ca.NotAfter, ca.IsCA)
	}
	if d.Hold == "" {
		t.Error("Hold is empty: members could be started before their Secrets exist")
	}
	if len(d.WriteMembers) > 0 || d.WriteAppClient != nil || len(d.TrustOutdated) > 0 || d.RotationStarted {
		t.Errorf("creating the CA must do nothing else, got members=%v app=%v outdated=%v", writtenNames(d), d.WriteAppClient != nil, d.TrustOutdated)
	}
	if d.Pass != pki.Done {
		t.Errorf("Pass = %s, want Done", d.Pass)
	}
}

// A CA that cannot be created (pki refuses a nameless cluster) holds instead of writing anything.
func TestDecideCACreationErrorHolds(t *testing.T) {
	f := facts(t0, nil, nil)
	f.Cluster = ""
	d := Decide(f)
	if d.WriteCA != nil || !strings.Contains(d.Hold, "creating the cluster CA") {
		t.Fatalf("WriteCA=%v Hold=%q, want no write and a Hold saying why", d.WriteCA, d.Hold)
	}
}

// With the CA in place, members without Secrets get both leaves and the application its client
// Secret, all signed by the CA, valid for exactly the names the member is reached by, and
// published with the CA as trust bundle.
func TestDecideIssuesMissingMaterial(t *testing.T) {
	ca := mustCA(t, t0, caLife)
	now := t0.Add(time.Hour)
	f := facts(now, ca, nil)
	for _, name := range memberNames(3) {
		f.Members = append(f.Members, Member{Name: name})
	}
	// A Pod that exists but has no Secret and does not answer has nothing to present: it must not
	// stop its Secret from being issued.
	f.Members[2].Pod = &Pod{Trust: fps(ca)}

	d := Decide(f)
	if d.WriteCA != nil || d.Hold != "" || d.Pending != "" {
		t.Fatalf("WriteCA=%v Hold=%q Pending=%q, want plain issuance", d.WriteCA != nil, d.Hold, d.Pending)
	}
	if got, want := writtenNames(d), memberNames(3); !slices.Equal(got, want) {
		t.Fatalf("written %v, want %v", got, want)
	}
	if len(outdatedNames(d)) > 0 {
		t.Errorf("TrustOutdated %v: issuing material restarts nobody", outdatedNames(d))
	}
	if d.Signer != ca || !slices.Equal(pki.Fingerprints(d.Trust), fps(ca)) {
		t.Errorf("Signer/Trust are not the CA alone: trust %v", pki.Fingerprints(d.Trust))
	}
	for _, w := range d.WriteMembers {
		if w.Why != "missing" {
			t.Errorf("%s: Why = %q, want missing", w.Name, w.Why)
		}
		if !slices.Equal(pki.Fingerprints(w.Secret.Trust), fps(ca)) {
			t.Errorf("%s: trust %v, want the CA", w.Name, pki.Fingerprints(w.Secret.Trust))
		}
		for _, c := range []struct {
			u    pki.Usage
			leaf *pki.Leaf
		}{{pki.Server, w.Secret.Server}, {pki.Peer, w.Secret.Peer}} {
			m, err := c.leaf.Material(w.Secret.Trust...)
			if err != nil {
				t.Fatal(err)
			}
			if err := pki.Validate(m, pki.ExpectMember(c.u, names(w.Name)), now); err != nil {
				t.Errorf("%s %s leaf does not validate: %v", w.Name, c.u, err)
			}
			if want := now.Add(leafLife); !c.leaf.Cert.NotAfter.Equal(want) {
				t.Errorf("%s %s leaf expires %v, want %v (LeafLifetime)", w.Name, c.u, c.leaf.Cert.NotAfter, want)
			}
		}
		// Two certificates, two keys: the planes do not share one leaf.
		if sameCert(w.Secret.Server.Cert, w.Secret.Peer.Cert) {
			t.Errorf("%s: server and peer are one certificate", w.Name)
		}
	}
	app := d.WriteAppClient
	if app == nil {
		t.Fatal("no application client Secret written")
	}
	m, err := app.Leaf.Material(app.Trust...)
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.Validate(m, pki.Expect{Usage: pki.Client}, now); err != nil {
		t.Errorf("application client leaf does not validate: %v", err)
	}
	if slices.Contains(app.Leaf.Cert.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		t.Error("the application client leaf can serve: a leaked key could impersonate a member")
	}
	if app.Leaf.Cert.Subject.CommonName != testCluster+"-client" {
		t.Errorf("client CN %q", app.Leaf.Cert.Subject.CommonName)
	}
	if !slices.Equal(pki.Fingerprints(app.Trust), fps(ca)) {
		t.Errorf("client trust %v, want the CA", pki.Fingerprints(app.Trust))
	}
	// Status lists the CA, both leaves of every member and the client, none served yet.
	if got := len(d.Certificates); got != 1+2*3+1 {
		t.Errorf("%d certificates in status, want 8: %+v", got, d.Certificates)
	}
	for _, c := range d.Certificates {
		if c.Served {
			t.Errorf("%s reported served before any Pod answered", c.Name)
		}
	}
	if want := pki.RenewAt(d.WriteMembers[0].Secret.Server.Cert, fraction).Sub(now); d.RequeueAfter != want {
		t.Errorf("RequeueAfter = %v, want %v (the fresh leaves' renewal)", d.RequeueAfter, want)
	}
}

// A cluster whose material is fresh and served has nothing to do; it only asks to be looked at
// again when the first certificate falls due.
func TestDecideSteadyStateIsNoOp(t *testing.T) {
	ca := mustCA(t, t0, caLife)
	now := t0.Add(10 * day)
	f := steady(t, 3, ca, t0.Add(time.Hour), now)
	// A member without a Pod (being replaced) changes nothing either.
	f.Members[1].Pod = nil

	d := Decide(f)
	requireNoOp(t, d)
	if d.Expiring != "" {
		t.Errorf("Expiring = %q on fresh material", d.Expiring)
	}
	if !slices.Equal(pki.Fingerprints(d.Trust), fps(ca)) || d.Signer != ca {
		t.Errorf("trust %v, want the CA alone", pki.Fingerprints(d.Trust))
	}
	leafRenew := pki.RenewAt(f.Members[0].Secret.Server.Cert, fraction)
	if want := leafRenew.Sub(now); d.RequeueAfter != want {
		t.Errorf("RequeueAfter = %v, want %v (earliest renewal)", d.RequeueAfter, want)
	}
	served := map[string]bool{}
	for _, c := range d.Certificates {
		served[c.Name] = c.Served
		if c.Name == "ca" && !c.RenewAt.Equal(pki.RenewAt(ca.Cert, fraction)) {
			t.Errorf("ca RenewAt %v", c.RenewAt)
		}
	}
	for name, want := range map[string]bool{"etcd-0/server": true, "etcd-0/peer": true, "etcd-1/server": false, "etcd-2/peer": true, "client": false} {
		if got, ok := served[name]; !ok || got != want {
			t.Errorf("%s: served=%v listed=%v, want served=%v", name, got, ok, want)
		}
	}
}

// The CA's own renewal counts for the requeue when it comes before any leaf's.
func TestDecideRequeueForCA(t *testing.T) {
	ca := mustCA(t, t0, 150*day) // due at day 100
	now := t0.Add(95 * day)
	f := steady(t, 1, ca, now.Add(-time.Hour), now)
	d := Decide(f)
	requireNoOp(t, d)
	if want := pki.RenewAt(ca.Cert, fraction).Sub(now); d.RequeueAfter != want {
		t.Errorf("RequeueAfter = %v, want %v (the CA's renewal)", d.RequeueAfter, want)
	}
}

// The annotation is a set: the same CAs in any order, or repeated, read and write the same value,
// so a rewrite never looks like a trust change (which would cost a rolling restart).
func TestFormatParseTrust(t *testing.T) {
	a, b := mustCA(t, t0, caLife), mustCA(t, t0.Add(time.Hour), caLife)
	ab := FormatTrust([]*x509.Certificate{a.Cert, b.Cert})
	for _, bundle := range [][]*x509.Certificate{{b.Cert, a.Cert}, {a.Cert, b.Cert, a.Cert}, {b.Cert, b.Cert, a.Cert}} {
		if got := FormatTrust(bundle); got != ab {
			t.Errorf("FormatTrust depends on order or repeats: %q vs %q", got, ab)
		}
	}
	if got, want := ParseTrust(ab), pki.Fingerprints([]*x509.Certificate{a.Cert, b.Cert}); !slices.Equal(got, want) {
		t.Errorf("ParseTrust(FormatTrust) = %v, want %v", got, want)
	}
	// A hand-edited annotation in the other order reads as the same set.
	parts := strings.Split(ab, ",")
	slices.Reverse(parts)
	if got := ParseTrust(strings.Join(parts, ",")); !slices.Equal(got, ParseTrust(ab)) {
		t.Errorf("ParseTrust depends on order: %v", got)
	}
	if got := ParseTrust(FormatTrust([]*x509.Certificate{a.Cert})); !slices.Equal(got, []string{pki.Fingerprint(a.Cert)}) {
		t.Errorf("single CA round trip = %v", got)
	}
	if FormatTrust(nil) != "" || ParseTrust("") != nil {
		t.Errorf("empty trust: FormatTrust=%q ParseTrust=%v", FormatTrust(nil), ParseTrust(""))
	}
	if !strings.Contains(stewardv1.AnnotationTrust, "etcd.steward.dev/") {
		t.Errorf("AnnotationTrust %q is not in Steward's domain", stewardv1.AnnotationTrust)
	}
}

// A Pod's recorded trust is compared as a set during a rotation: an annotation listing the CAs in
// another order than FormatTrust writes them does not mark the member for a needless restart.
func TestDecideTrustComparedAsSet(t *testing.T) {
	old, next := mustCA(t, t0, caLife), mustCA(t, t0.Add(day), caLife)
	now := t0.Add(2 * day)
	f := steady(t, 2, old, t0, now)
	f.NextCA = next
	both := fps(old, next)
	slices.Reverse(both)
	f.Members[0].Pod.Trust = both
	d := Decide(f)
	if d.Pass != pki.WidenTrust {
		t.Fatalf("pass %s, want WidenTrust", d.Pass)
	}
	if got := outdatedNames(d); !slices.Equal(got, []string{"etcd-1"}) {
		t.Errorf("TrustOutdated %v, want only etcd-1 (etcd-0 already trusts both)", got)
	}
}
