package tlsplan

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcd-steward/steward/internal/pki"
)

// DefaultClientGrace is how long DropOldCA waits, without approval, for clients that load their
// certificates once: a week covers a maintenance window for restarting kube-apiservers.
const DefaultClientGrace = 7 * 24 * time.Hour

// ClientWait is a rotation waiting, before members stop trusting the old CA on the client plane,
// for clients that read their files once (a kube-apiserver reads --etcd-cafile, --etcd-certfile
// and --etcd-keyfile at start): until they restart they present an old-signed certificate, which
// only a member that still trusts the old CA accepts.
type ClientWait struct {
	// Approval is the value spec.tls.approveDropOldCA must hold to drop the old CA now. It names
	// the rotation (its target bundle), so an approval left in the spec never approves the next.
	Approval string
	// Until is when the grace ends and the old CA is dropped without approval.
	Until   time.Time
	Message string
}

// DropOldCAApproval is the approval value of a rotation towards the target bundle.
func DropOldCAApproval(target []*x509.Certificate) string {
	sum := sha256.Sum256([]byte(strings.Join(pki.Fingerprints(target), ",")))
	return hex.EncodeToString(sum[:6])
}

// clientGrace is spec.tls.dropOldCAAfter with its default, never shorter than the application
// Secret's wait: an application that reloads must have loaded the new certificate first.
func (f *Facts) clientGrace() time.Duration {
	switch {
	case f.ClientGrace == 0:
		return DefaultClientGrace
	case f.ClientGrace < f.appGrace():
		return f.appGrace()
	}
	return f.ClientGrace
}

func (f *Facts) appGrace() time.Duration {
	if f.AppGrace == 0 {
		return DefaultAppGrace
	}
	return f.AppGrace
}

// clientWait says whether dropping the old CA must still wait: the grace runs from since (when
// the clients' new certificate was published) and ends early on approval. It never outlasts the
// old CA: past its expiry nothing it signed verifies, so waiting would protect no client.
func (f *Facts) clientWait(target []*x509.Certificate, since time.Time, old *x509.Certificate, secret string) *ClientWait {
	w := &ClientWait{Approval: DropOldCAApproval(target), Until: since.Add(f.clientGrace())}
	if old != nil && old.NotAfter.Before(w.Until) {
		w.Until = old.NotAfter
	}
	if f.ApproveDropOldCA == w.Approval || !f.Now.Before(w.Until) {
		return nil
	}
	w.Message = fmt.Sprintf("CA rotation pass DropOldCA waits for clients that load certificates once: restart clients "+
		"that load certificates once (for example kube-apiserver) so they pick up the new ca.crt and client certificate "+
		"from %s, then approve with spec.tls.approveDropOldCA: %q; without approval the old CA is dropped at %s",
		secret, w.Approval, w.Until.UTC().Format(time.RFC3339))
	return w
}

// dropBegun: a member already restarted trusting the target alone. Old-only clients are refused
// by it whatever happens next, so the pass finishes rather than leave the cluster split.
func dropBegun(members []Member, trusts func(*Pod) []string, target []string) bool {
	return slices.ContainsFunc(members, func(m Member) bool {
		return m.Pod != nil && slices.Equal(trusts(m.Pod), target)
	})
}

// keepOldCA turns a DropOldCA plan that must wait into one that changes nothing: members keep
// (and new Pods get) both CAs, so a member restarted for any other reason still accepts old
// clients.
func keepOldCA(rot pki.RotationPlan, old, next *x509.Certificate) pki.RotationPlan {
	rot.Trust, rot.Restart, rot.Pending = pki.Bundle(old, next), false, nil
	return rot
}

// chained is the leaf with what it must present after itself: the next CA cross-signed by the
// current one when the next CA signed it and a rotation is under way (clients trusting only the
// current CA then still verify it), nothing otherwise. changed says the Secret needs a write. A
// cross-signed certificate already on a member is reused, so Secrets are not rewritten for it.
func (f *Facts) chained(l *pki.Leaf) (out *pki.Leaf, changed bool, err error) {
	if l == nil {
		return nil, false, nil
	}
	if f.NextCA == nil || l.Cert.CheckSignatureFrom(f.NextCA.Cert) != nil || !pki.AdmitsCrossSigned(f.CA.Cert) {
		if len(l.Chain) == 0 {
			return l, false, nil
		}
		return l.WithChain(), true, nil
	}
	if len(l.Chain) == 1 && pki.IsCrossSigned(l.Chain[0], f.CA.Cert, f.NextCA.Cert) {
		return l, false, nil
	}
	if f.cross == nil {
		for _, m := range f.Members {
			if m.Secret == nil {
				continue
			}
			for _, c := range slices.Concat(m.Secret.Server.Chain, m.Secret.Peer.Chain) {
				if pki.IsCrossSigned(c, f.CA.Cert, f.NextCA.Cert) {
					f.cross = c
				}
			}
		}
	}
	if f.cross == nil {
		if f.cross, err = f.CA.CrossSign(f.NextCA.Cert); err != nil {
			return nil, false, err
		}
	}
	return l.WithChain(f.cross), true, nil
}

// sameChain: the leaf presents exactly chain after itself.
func sameChain(l *pki.Leaf, chain []*x509.Certificate) bool {
	return len(l.Chain) == len(chain) && slices.Equal(pki.Fingerprints(l.Chain), pki.Fingerprints(chain))
}
