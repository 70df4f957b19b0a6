package pki

import (
	"crypto/x509"
	"fmt"
	"slices"
)

// Pass is a stage of a CA rotation. etcd builds its CA pools once, at process start, but re-reads
// its leaf certificate and key on every handshake. So trust changes cost a restart and leaf changes
// do not, and a rotation is three passes, each finished on every member before the next begins:
//
//  1. WidenTrust: every member restarts trusting {old, new}; leaves stay old-signed.
//  2. SwapLeaves: every leaf (member server and peer, operator and application clients) is
//     re-issued by the new CA; no restart.
//  3. DropOldCA: every member restarts trusting {new} only.
//
// Invariant: at every step, every certificate any party presents is signed by a CA that every
// party verifying it trusts. During pass 1 all leaves are old-signed and every member trusts old
// (restarting one member only adds new). During pass 2 every member trusts both, so either leaf
// verifies. During pass 3 all leaves are new-signed and every member trusts new (restarting one
// only removes old). The pass is derived from the members' live state, and a state that breaks the
// invariant is refused, not planned around, so no pair of members is ever left unable to
// authenticate each other.
type Pass string

const (
	WidenTrust Pass = "WidenTrust"
	SwapLeaves Pass = "SwapLeaves"
	DropOldCA  Pass = "DropOldCA"
	// Done: nothing to rotate, or every member runs on the new CA alone; the controller then makes
	// the new CA the current one and discards the old.
	Done Pass = "Done"
)

// PartyTLS is what one party runs with now: live facts, never intent.
type PartyTLS struct {
	Name string
	// Trusts are the fingerprints of the CAs the running process loaded at start. For a member
	// this is what was recorded when its Pod started, not the Secret's current ca.crt, which may
	// already be wider. Unused for clients (they verify servers, which are covered by ClientBundle).
	Trusts []string
	// LeafCA is the fingerprint of the CA that signed the leaf it presents (for members: the
	// leaf verified as served, server and peer swapped together).
	LeafCA string
}

// RotationInput is a cluster's CA state. New is nil when no rotation is under way.
type RotationInput struct {
	Old, New *x509.Certificate
	Members  []PartyTLS
	// Clients are the operator's and applications' client certificates that Steward issues; they
	// must be new-signed before any member stops trusting the old CA.
	Clients []PartyTLS
}

// RotationPlan is the current pass and who still needs its step.
type RotationPlan struct {
	Pass Pass
	// Pending members, sorted by name; the rollout engine picks the order (victim order) and runs
	// restarts through the disruption function, one at a time.
	Pending []string
	// PendingClients need their client certificate re-issued by Signer (SwapLeaves only).
	PendingClients []string
	// Restart is true when the step changes trust (etcd must restart to load it), false when it
	// only replaces leaves (picked up on the next handshake).
	Restart bool
	// Trust is the ca.crt every member gets during this pass (written before a member restarts).
	Trust []*x509.Certificate
	// Signer is the CA that signs every leaf issued during this pass, renewals included.
	Signer *x509.Certificate
	// Client is ClientBundle(Pass): the ca.crt of the applications' Secret.
	Client []*x509.Certificate
}

// PlanRotation derives the pass from the live state. An error means the state breaks the
// invariant or names an unknown CA: the controller sets a condition and disrupts nothing.
func PlanRotation(in RotationInput) (RotationPlan, error) {
	if in.Old == nil {
		return RotationPlan{}, fmt.Errorf("pki: rotation needs the current CA")
	}
	if in.New == nil || Fingerprint(in.New) == Fingerprint(in.Old) {
		return passPlan(Done, in.Old, in.Old), nil
	}
	o, n := Fingerprint(in.Old), Fingerprint(in.New)
	parties := append(slices.Clone(in.Members), in.Clients...)
	allTrust := func(fp string) bool {
		return !slices.ContainsFunc(in.Members, func(m PartyTLS) bool { return !slices.Contains(m.Trusts, fp) })
	}
	for _, m := range in.Members {
		if !slices.Contains(m.Trusts, o) && !slices.Contains(m.Trusts, n) {
			return RotationPlan{}, fmt.Errorf("pki: member %s trusts neither the old nor the new CA", m.Name)
		}
	}
	anyLeaf := map[string]bool{}
	for _, p := range parties {
		if p.LeafCA != o && p.LeafCA != n {
			return RotationPlan{}, fmt.Errorf("pki: %s presents a leaf signed by neither the old nor the new CA", p.Name)
		}
		anyLeaf[p.LeafCA] = true
	}
	// The invariant itself: a leaf signed by X is only safe while every member trusts X.
	for _, fp := range []string{o, n} {
		if anyLeaf[fp] && !allTrust(fp) {
			which := map[string]string{o: "old", n: "new"}[fp]
			return RotationPlan{}, fmt.Errorf("pki: a %s-signed leaf is presented while a member does not trust the %s CA; refusing to continue", which, which)
		}
	}
	var pass Pass
	switch {
	case !allTrust(n):
		pass = WidenTrust
	case anyLeaf[o]:
		pass = SwapLeaves
	case slices.ContainsFunc(in.Members, func(m PartyTLS) bool { return !sameSet(m.Trusts, []string{n}) }):
		pass = DropOldCA
	default:
		pass = Done
	}
	plan := passPlan(pass, in.Old, in.New)
	want := Fingerprints(plan.Trust)
	for _, m := range in.Members {
		switch {
		case plan.Restart && !sameSet(m.Trusts, want):
			plan.Pending = append(plan.Pending, m.Name)
		case pass == SwapLeaves && m.LeafCA != n:
			plan.Pending = append(plan.Pending, m.Name)
		}
	}
	for _, c := range in.Clients {
		if pass == SwapLeaves && c.LeafCA != n {
			plan.PendingClients = append(plan.PendingClients, c.Name)
		}
	}
	slices.Sort(plan.Pending)
	slices.Sort(plan.PendingClients)
	return plan, nil
}

// passPlan is the fixed part of a pass: what to trust, who signs, whether steps restart.
func passPlan(p Pass, old, new *x509.Certificate) RotationPlan {
	plan := RotationPlan{Pass: p, Client: ClientBundle(p, old, new)}
	switch p {
	case WidenTrust:
		plan.Trust, plan.Signer, plan.Restart = Bundle(old, new), old, true
	case SwapLeaves:
		plan.Trust, plan.Signer = Bundle(old, new), new
	case DropOldCA:
		plan.Trust, plan.Signer, plan.Restart = Bundle(new), new, true
	default:
		plan.Trust, plan.Signer = Bundle(new), new
	}
	return plan
}

// ClientBundle is the trust bundle for application clients during a pass. It holds both CAs from
// the first pass on, so it is published before any server leaf changes and a client that reloads
// it late still verifies every member. It keeps the old CA through DropOldCA (harmless: no member
// presents an old-signed leaf by then) and narrows to the new CA once the rotation is Done.
func ClientBundle(p Pass, old, new *x509.Certificate) []*x509.Certificate {
	if new == nil {
		return Bundle(old)
	}
	if p == Done {
		return Bundle(new)
	}
	return Bundle(old, new)
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
