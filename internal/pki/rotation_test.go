package pki

import (
	"crypto/x509"
	"slices"
	"strings"
	"testing"

	"github.com/etcd-steward/steward/internal/resources"
)

// stateOf builds a party from letters: o = old CA, n = new CA, x = an unknown one.
func stateOf(old, new *x509.Certificate) func(trust string, leaf string) PartyTLS {
	fp := map[string]string{"o": Fingerprint(old), "n": Fingerprint(new), "x": strings.Repeat("0", 64)}
	return func(trust, leaf string) PartyTLS {
		var p PartyTLS
		for _, c := range trust {
			p.Trusts = append(p.Trusts, fp[string(c)])
		}
		p.LeafCA = fp[leaf]
		return p
	}
}

func TestPlanRotationStates(t *testing.T) {
	old, new := mustCA(t, "etcd", t0).Cert, mustCA(t, "etcd", t0.Add(1)).Cert
	st := stateOf(old, new)
	members := func(ps ...PartyTLS) []PartyTLS {
		for i := range ps {
			ps[i].Name = resources.MemberName("etcd", int32(i))
		}
		return ps
	}
	client := func(leaf string) []PartyTLS { p := st("", leaf); p.Name = "operator"; return []PartyTLS{p} }
	for _, tt := range []struct {
		name    string
		in      RotationInput
		pass    Pass
		pending string // comma-separated members, then "|" clients
		err     string
	}{
		{"no rotation", RotationInput{Old: old, Members: members(st("o", "o"), st("o", "o"))}, Done, "|", ""},
		{"new equals old", RotationInput{Old: old, New: old, Members: members(st("o", "o"))}, Done, "|", ""},
		{"start", RotationInput{Old: old, New: new, Members: members(st("o", "o"), st("o", "o"), st("o", "o")), Clients: client("o")}, WidenTrust, "etcd-0,etcd-1,etcd-2|", ""},
		{"widening", RotationInput{Old: old, New: new, Members: members(st("o", "o"), st("on", "o"), st("on", "o")), Clients: client("o")}, WidenTrust, "etcd-0|", ""},
		{"widening, an extra CA counts as not done", RotationInput{Old: old, New: new, Members: members(st("onx", "o"), st("on", "o"), st("o", "o"))}, WidenTrust, "etcd-0,etcd-2|", ""},
		{"widened", RotationInput{Old: old, New: new, Members: members(st("on", "o"), st("on", "o"), st("on", "o")), Clients: client("o")}, SwapLeaves, "etcd-0,etcd-1,etcd-2|operator", ""},
		{"swapping", RotationInput{Old: old, New: new, Members: members(st("on", "o"), st("on", "n"), st("on", "n")), Clients: client("n")}, SwapLeaves, "etcd-0|", ""},
		{"members swapped, client not yet", RotationInput{Old: old, New: new, Members: members(st("on", "n"), st("on", "n"), st("on", "n")), Clients: client("o")}, SwapLeaves, "|operator", ""},
		{"swapped", RotationInput{Old: old, New: new, Members: members(st("on", "n"), st("on", "n"), st("on", "n")), Clients: client("n")}, DropOldCA, "etcd-0,etcd-1,etcd-2|", ""},
		{"dropping", RotationInput{Old: old, New: new, Members: members(st("on", "n"), st("n", "n"), st("on", "n")), Clients: client("n")}, DropOldCA, "etcd-0,etcd-2|", ""},
		{"done", RotationInput{Old: old, New: new, Members: members(st("n", "n"), st("n", "n"), st("n", "n")), Clients: client("n")}, Done, "|", ""},
		{"no members", RotationInput{Old: old, New: new}, Done, "|", ""},

		{"no current CA", RotationInput{New: new}, "", "", "current CA"},
		{"leaf from an unknown CA", RotationInput{Old: old, New: new, Members: members(st("o", "x"))}, "", "", "neither"},
		{"member trusts neither", RotationInput{Old: old, New: new, Members: members(st("x", "o"))}, "", "", "trusts neither"},
		{"new leaf before trust widened", RotationInput{Old: old, New: new, Members: members(st("on", "n"), st("o", "o"))}, "", "", "new-signed leaf"},
		{"old dropped while an old leaf is served", RotationInput{Old: old, New: new, Members: members(st("n", "n"), st("on", "o"))}, "", "", "old-signed leaf"},
		{"old dropped while a client is old-signed", RotationInput{Old: old, New: new, Members: members(st("n", "n"), st("on", "n")), Clients: client("o")}, "", "", "old-signed leaf"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := PlanRotation(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one mentioning %q (plan %+v)", err, tt.err, p)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(p.Pending, ",") + "|" + strings.Join(p.PendingClients, ",")
			if p.Pass != tt.pass || got != tt.pending {
				t.Fatalf("got %s %q, want %s %q", p.Pass, got, tt.pass, tt.pending)
			}
		})
	}
}

// What each pass writes: trust for members, the signer of every leaf, restart or not, and the
// client bundle. The client bundle holds both CAs in every pass that can see a new-signed leaf.
func TestPassPlans(t *testing.T) {
	old, new := mustCA(t, "etcd", t0).Cert, mustCA(t, "etcd", t0.Add(1)).Cert
	both, newOnly := Fingerprints(Bundle(old, new)), Fingerprints(Bundle(new))
	for _, tt := range []struct {
		pass    Pass
		trust   []string
		signer  *x509.Certificate
		restart bool
		client  []string
	}{
		{WidenTrust, both, old, true, both},
		{SwapLeaves, both, new, false, both},
		{DropOldCA, newOnly, new, true, both},
		{Done, newOnly, new, false, newOnly},
	} {
		p := passPlan(tt.pass, old, new)
		if !slices.Equal(Fingerprints(p.Trust), tt.trust) || !p.Signer.Equal(tt.signer) || p.Restart != tt.restart ||
			!slices.Equal(Fingerprints(p.Client), tt.client) || !slices.Equal(Fingerprints(ClientBundle(tt.pass, old, new)), tt.client) {
			t.Errorf("%s: trust %d signer new=%v restart %v client %d", tt.pass, len(p.Trust), p.Signer.Equal(new), p.Restart, len(p.Client))
		}
	}
	if got := ClientBundle(WidenTrust, old, nil); len(got) != 1 || !got[0].Equal(old) {
		t.Error("without rotation the client bundle is the current CA")
	}
}
