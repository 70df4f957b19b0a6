package tlsplan

import (
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcd-steward/steward/internal/pki"
)

// Decision is what to write this reconcile and what the rollout engine must know.
type Decision struct {
	// WriteCA, when set, is the CA Secret's new content (Current, Next). It is written before
	// anything else; the rest of the decision assumes it.
	WriteCA *CAWrite
	// RotationStarted: WriteCA begins a rotation; status records spec.tls.rotateCA as handled.
	RotationStarted bool
	// WriteMembers are member Secrets to (re)write, by member name.
	WriteMembers []MemberWrite
	// WriteAppClient is the application client Secret's new content.
	WriteAppClient *Material

	// Signer signs every leaf issued now, the operator's own client certificate included.
	Signer *pki.CA
	// Trust is the bundle members are to run with: new Pods record it, and members whose Pod
	// started with another are TrustOutdated. The operator verifies members against it too.
	Trust []*x509.Certificate
	// TrustOutdated are members the current pass restarts (only while it is safe to).
	TrustOutdated map[string]bool

	// Hold, when set, says why no member may be created, restarted or replaced: material is missing
	// or a state would break authentication. Nothing is disrupted while it is set.
	Hold string
	// Pending, when set, says what non-disruptive TLS work is still in flight (a renewal not yet
	// served, a rotation pass); the cluster is not reconciled until it is done.
	Pending string

	// AwaitingClients is set while DropOldCA waits for approval or its grace: clients that load
	// certificates once must restart first. Members keep trusting the old CA meanwhile.
	AwaitingClients *ClientWait

	// Pass is the CA rotation pass, Done when none is under way.
	Pass pki.Pass
	// Certificates are the expiries status shows; Expiring warns of one Steward cannot renew in
	// time.
	Certificates []Certificate
	Expiring     string
	// RequeueAfter is when the next renewal falls due.
	RequeueAfter time.Duration
}

// CAWrite is the CA Secret's content.
type CAWrite struct{ Current, Next *pki.CA }

// MemberWrite is a member Secret's content and why it is written.
type MemberWrite struct {
	Name   string
	Secret MemberSecret
	Why    string
}

// Certificate is one tracked certificate.
type Certificate struct {
	Name     string
	NotAfter time.Time
	RenewAt  time.Time
	Served   bool
}

// Decide is one reconcile's TLS step.
func Decide(f Facts) Decision {
	if f.User != nil {
		return decideUser(f)
	}
	if f.CA == nil && slices.ContainsFunc(f.Members, func(m Member) bool { return m.Secret != nil || m.Pod != nil }) {
		// Members hold leaves of a CA whose Secret is gone: a new CA would lock them out.
		return Decision{Pass: pki.Done, Hold: fmt.Sprintf("the CA Secret %s is missing while members hold certificates "+
			"it signed; restore it from a backup (Steward does not replace a CA members trust)", f.CASecret)}
	}
	if f.CA == nil {
		ca, err := pki.NewCA(f.Cluster, f.Namespace, f.Now, f.CALifetime)
		if err != nil {
			return Decision{Hold: "creating the cluster CA: " + err.Error(), Pass: pki.Done}
		}
		return Decision{WriteCA: &CAWrite{Current: ca}, Hold: "creating the cluster CA", Pass: pki.Done}
	}
	due := f.NextCA == nil && (f.RotateRequested || pki.RenewalDue(f.CA.Cert, f.Now, f.RenewFraction))
	if due && f.RotationHold != "" {
		d := decideRotation(f)
		if d.Pending == "" && d.Hold == "" {
			d.Pending = "a CA rotation waits: " + f.RotationHold
		}
		return d
	}
	if due {
		next, err := pki.NewCA(f.Cluster, f.Namespace, f.Now, f.CALifetime)
		if err != nil {
			return Decision{Hold: "creating the next CA: " + err.Error(), Pass: pki.Done}
		}
		why := "spec.tls.rotateCA changed"
		if !f.RotateRequested {
			why = "the CA is due for renewal"
		}
		return Decision{WriteCA: &CAWrite{Current: f.CA, Next: next}, RotationStarted: f.RotateRequested,
			Pending: "starting a CA rotation: " + why, Pass: pki.WidenTrust}
	}
	return decideRotation(f)
}

// decideRotation moves the current CA's leaves, or a rotation under way, on by one step.
func decideRotation(f Facts) Decision {
	in := f.rotationInput()
	rot, err := pki.PlanRotation(in)
	if err == nil && f.NextCA == nil {
		err = trustsCurrent(in)
	}
	if err != nil {
		return Decision{Hold: err.Error(), Pass: pki.Done, Signer: f.CA, Trust: pki.Bundle(f.CA.Cert, certOf(f.NextCA))}
	}
	var wait *ClientWait
	if rot.Pass == pki.DropOldCA && !dropBegun(f.Members, (*Pod).ClientPlaneTrust, pki.Fingerprints(rot.Trust)) {
		if wait = f.clientWait(rot.Trust, f.appLeafSince(), f.CA.Cert, "the Secret "+f.Cluster+"-client-tls"); wait != nil {
			rot = keepOldCA(rot, f.CA.Cert, f.NextCA.Cert)
		}
	}
	signer := f.CA
	if f.NextCA != nil && pki.Fingerprint(rot.Signer) == pki.Fingerprint(f.NextCA.Cert) {
		signer = f.NextCA
	}
	appWait := f.appsLoadingBundle(rot)
	if appWait != "" {
		signer = f.CA // leaves stay old-signed until applications trust the new CA too
	}
	d := Decision{Pass: rot.Pass, Signer: signer, Trust: rot.Trust, TrustOutdated: map[string]bool{}}
	if rot.Pass == pki.Done && f.NextCA != nil {
		// Every member runs on the new CA alone and every leaf is new-signed: make it current.
		d.WriteCA = &CAWrite{Current: f.NextCA}
		d.Pending = "finishing the CA rotation"
		return d
	}
	if err := d.issue(&f, rot); err != nil {
		d.Hold = err.Error()
		return d
	}
	d.markOutdated(&f, rot)
	if appWait != "" {
		d.Pending = appWait
	}
	if wait != nil {
		d.AwaitingClients = wait
		d.Pending = strings.TrimPrefix(d.Pending+"; "+wait.Message, "; ")
	}
	d.status(&f)
	return d
}

// appsLoadingBundle holds SwapLeaves while the application Secret's widened bundle may not have
// reached applications yet: a member presenting a new-signed leaf would be refused by a client
// still on the old bundle.
func (f *Facts) appsLoadingBundle(rot pki.RotationPlan) string {
	grace := f.AppGrace
	if grace == 0 {
		grace = DefaultAppGrace
	}
	if rot.Pass != pki.SwapLeaves || f.AppBundleSince.IsZero() || !f.Now.Before(f.AppBundleSince.Add(grace)) {
		return ""
	}
	return fmt.Sprintf("CA rotation pass SwapLeaves: giving applications until %s to load the widened trust bundle "+
		"before members present new-signed certificates", f.AppBundleSince.Add(grace).UTC().Format(time.RFC3339))
}

// appLeafSince is when the application Secret's new-signed certificate was issued: clients that
// restart from then on load everything DropOldCA leaves them needing. Now when there is none yet.
func (f *Facts) appLeafSince() time.Time {
	if f.AppClient == nil || f.NextCA == nil || f.AppClient.Leaf.Cert.CheckSignatureFrom(f.NextCA.Cert) != nil {
		return f.Now
	}
	return f.AppClient.Leaf.Cert.NotBefore.Add(pki.Backdate)
}

// trustsCurrent refuses a steady state in which a member does not trust the CA or presents a leaf
// it did not sign (a CA Secret restored from the wrong backup, a hand-edited Secret): re-issuing
// leaves from the CA would lock that member out, since etcd only loads trust when it starts.
func trustsCurrent(in pki.RotationInput) error {
	ca := pki.Fingerprint(in.Old)
	for _, m := range in.Members {
		if !slices.Contains(m.Trusts, ca) {
			return fmt.Errorf("member %s does not trust the cluster CA (it started trusting %v); restore the CA Secret it was issued from", m.Name, m.Trusts)
		}
		if m.LeafCA != ca {
			return fmt.Errorf("member %s presents a certificate the cluster CA did not sign; restore the CA Secret it was issued from", m.Name)
		}
	}
	return nil
}

func certOf(ca *pki.CA) *x509.Certificate {
	if ca == nil {
		return nil
	}
	return ca.Cert
}

// rotationInput turns the facts into PlanRotation's parties. A member counts with the trust its
// Pod started with and the leaf it serves; while it does not answer, with the leaf its Secret
// holds (what it will serve when it is back).
func (f *Facts) rotationInput() pki.RotationInput {
	in := pki.RotationInput{Old: f.CA.Cert, New: certOf(f.NextCA)}
	for _, m := range f.Members {
		if m.Pod == nil {
			continue
		}
		p := pki.PartyTLS{Name: m.Name, Trusts: m.Pod.Trust}
		switch {
		case m.Pod.Served != nil:
			p.LeafCA = f.issuer(m.Pod.Served)
		case m.Secret != nil:
			p.LeafCA = f.issuer(m.Secret.Server.Cert)
		default:
			continue // no Pod material at all: it cannot present anything
		}
		in.Members = append(in.Members, p)
	}
	if f.AppClient != nil {
		in.Clients = append(in.Clients, pki.PartyTLS{Name: "client", LeafCA: f.issuer(f.AppClient.Leaf.Cert)})
	}
	return in
}

// issuer is the fingerprint of the CA (current or next) that signed c, or "" for neither.
func (f *Facts) issuer(c *x509.Certificate) string {
	for _, ca := range []*pki.CA{f.CA, f.NextCA} {
		if ca != nil && c.CheckSignatureFrom(ca.Cert) == nil {
			return pki.Fingerprint(ca.Cert)
		}
	}
	return ""
}

// issue writes every Secret whose content differs from the pass: leaves due for renewal or signed
// by another CA than the signer, trust bundles other than the pass's.
func (d *Decision) issue(f *Facts, rot pki.RotationPlan) error {
	trust := pki.Fingerprints(rot.Trust)
	for _, m := range f.Members {
		s, why := MemberSecret{Trust: rot.Trust}, ""
		if m.Secret != nil {
			s.Server, s.Peer = m.Secret.Server, m.Secret.Peer
			if !slices.Equal(pki.Fingerprints(m.Secret.Trust), trust) {
				why = "trust bundle for pass " + string(rot.Pass)
			}
		}
		if reason := d.stale(f, s.Server); reason != "" {
			leaf, err := d.Signer.IssueServer(f.names(m.Name), f.Now, f.LeafLifetime)
			if err != nil {
				return fmt.Errorf("issuing %s's server certificate: %w", m.Name, err)
			}
			s.Server, why = leaf, reason
		}
		if reason := d.stale(f, s.Peer); reason != "" {
			leaf, err := d.Signer.IssuePeer(f.names(m.Name), f.Now, f.LeafLifetime)
			if err != nil {
				return fmt.Errorf("issuing %s's peer certificate: %w", m.Name, err)
			}
			s.Peer, why = leaf, reason
		}
		for _, l := range []**pki.Leaf{&s.Server, &s.Peer} {
			leaf, changed, err := f.chained(*l)
			if err != nil {
				return fmt.Errorf("%s's certificate chain: %w", m.Name, err)
			}
			if *l = leaf; changed && why == "" {
				why = "certificate chain for pass " + string(rot.Pass)
			}
		}
		if why != "" {
			d.WriteMembers = append(d.WriteMembers, MemberWrite{Name: m.Name, Secret: s, Why: why})
		}
	}
	app := Material{Trust: rot.Client}
	changed := f.AppClient == nil || !slices.Equal(pki.Fingerprints(f.AppClient.Trust), pki.Fingerprints(rot.Client))
	if f.AppClient != nil {
		app.Leaf = f.AppClient.Leaf
	}
	if d.stale(f, app.Leaf) != "" {
		leaf, err := d.Signer.IssueClient(f.Cluster+"-client", f.Now, f.LeafLifetime)
		if err != nil {
			return fmt.Errorf("issuing the application client certificate: %w", err)
		}
		app.Leaf, changed = leaf, true
	}
	if changed {
		d.WriteAppClient = &app
	}
	return nil
}

// stale says why a leaf must be (re)issued, or "" when it can stay.
func (d *Decision) stale(f *Facts, l *pki.Leaf) string {
	switch {
	case l == nil:
		return "missing"
	case l.Cert.CheckSignatureFrom(d.Signer.Cert) != nil:
		return "re-signing with the new CA"
	case pki.RenewalDue(l.Cert, f.Now, f.RenewFraction):
		return "renewal due"
	case f.LeafLifetime > 0 && l.Cert.NotAfter.After(f.Now.Add(f.LeafLifetime+time.Minute)):
		// spec.tls.certificateDuration was shortened: the new lifetime applies now, not at the
		// old leaf's renewal, which could be months away.
		return "lifetime shortened"
	}
	return ""
}
