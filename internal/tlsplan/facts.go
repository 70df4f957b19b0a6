// Package tlsplan decides what Steward does with a cluster's certificates in one reconcile: create
// the CA, issue and renew member and client leaves, and move a CA rotation through its passes. It
// is pure (time comes in as Facts.Now) and never disrupts anything itself: a pass that needs
// members to restart marks them TrustOutdated, and the rollout engine restarts them one at a time
// through the disruption chokepoint, gated on health, like any other roll.
//
// The rules it keeps (issue 6):
//   - Fail closed: a member whose material is missing or does not validate is never started; a
//     state that would leave two parties unable to authenticate is refused (Hold), not planned
//     around.
//   - Intent before action: every Secret a Pod will mount is written before the Pod is created or
//     restarted, and a Pod records the trust it started with (v1alpha1.AnnotationTrust), so
//     passes are derived from live state after any crash.
//   - Renewals need no restart (etcd reads its leaf on every handshake); a renewal counts as done
//     only once the member is seen serving the new leaf.
package tlsplan

import (
	"crypto/x509"
	"slices"
	"strings"
	"time"

	"github.com/etcd-steward/steward/internal/pki"
)

// DefaultAppGrace covers the kubelet's refresh of a mounted Secret (its sync period is a
// minute) plus an application's own reload interval.
const DefaultAppGrace = 90 * time.Second

// Facts are what the controller read this reconcile.
type Facts struct {
	Cluster, Namespace, ClusterDomain string
	Now                               time.Time
	// LeafLifetime and CALifetime are what new certificates get.
	LeafLifetime, CALifetime time.Duration
	// RenewFraction is the share of a lifetime after which a certificate is renewed.
	RenewFraction float64

	// CA and NextCA are the CA Secret's content; NextCA is set while a rotation is under way.
	CA, NextCA *pki.CA
	// CASecret names the CA Secret, for messages.
	CASecret string
	// RotateRequested: spec.tls.rotateCA holds a value no rotation was started for yet.
	RotateRequested bool
	// RotationHold, when set, says why no CA rotation may start now (an adoption under way: the
	// source's members trust only the source's CA); a rotation already started goes on.
	RotationHold string

	Members []Member
	// AppClient is the application client Secret's material; nil when it is missing or unreadable.
	AppClient *Material
	// AppBundleSince is when the application client Secret's ca.crt last changed; zero when
	// unknown (then it counts as long ago).
	AppBundleSince time.Time
	// AppGrace is how long applications get to load a changed bundle before any member presents
	// a leaf only the new bundle verifies; zero means DefaultAppGrace.
	AppGrace time.Duration

	// ApproveDropOldCA is spec.tls.approveDropOldCA: DropOldCA starts once it holds the
	// rotation's DropOldCAApproval, or once ClientGrace has passed.
	ApproveDropOldCA string
	// ClientGrace is spec.tls.dropOldCAAfter: how long after the clients' new certificate was
	// published DropOldCA waits without approval; zero means DefaultClientGrace.
	ClientGrace time.Duration

	// User is set when both planes come from the user's Secrets (source Secret): their material,
	// already validated, is rolled onto the members instead of anything Steward issues.
	User *UserTLS

	// cross caches the next CA cross-signed by the current one within one Decide.
	cross *x509.Certificate
}

// UserTLS is the validated content of the user's Secrets.
type UserTLS struct{ Peer, Client Material }

// Member is one member's material and Pod.
type Member struct {
	Name string
	// Secret is the member's TLS Secret; nil when missing or unreadable (it is then re-issued).
	Secret *MemberSecret
	// Pod is nil when the member has no Pod.
	Pod *Pod
}

// MemberSecret is what the member's Secret holds.
type MemberSecret struct {
	Server, Peer *pki.Leaf
	// Trust is the peer plane's bundle, and the client plane's too unless ClientTrust is set
	// (only user Secrets give the planes different CAs).
	Trust       []*x509.Certificate
	ClientTrust []*x509.Certificate
}

// ClientBundle is the client plane's trust.
func (s *MemberSecret) ClientBundle() []*x509.Certificate {
	if s.ClientTrust != nil {
		return s.ClientTrust
	}
	return s.Trust
}

// Pod is what the controller saw of the member's Pod.
type Pod struct {
	// Trust are the fingerprints of v1alpha1.AnnotationTrust (the peer plane's, and the client
	// plane's unless ClientTrust is set).
	Trust       []string
	ClientTrust []string
	// Served is the leaf the member presented on its client port this reconcile; nil when it did
	// not answer. Server and peer leaves live in one Secret volume, which the kubelet updates
	// atomically, so the served server leaf also tells whether the peer leaf reached the member.
	Served *x509.Certificate
	// ServedPeer is the leaf presented on the peer port (user Secrets only: there the planes'
	// leaves change independently).
	ServedPeer *x509.Certificate
}

// ClientPlaneTrust is the client plane's trust.
func (p *Pod) ClientPlaneTrust() []string {
	if p.ClientTrust != nil {
		return p.ClientTrust
	}
	return p.Trust
}

// Material is a leaf with the trust bundle published next to it.
type Material struct {
	Leaf  *pki.Leaf
	Trust []*x509.Certificate
}

// FormatTrust is the v1alpha1.AnnotationTrust value for a bundle.
func FormatTrust(bundle []*x509.Certificate) string {
	return strings.Join(pki.Fingerprints(pki.Bundle(bundle...)), ",")
}

// FormatPlaneTrust is the v1alpha1.AnnotationTrust value when the planes trust different CAs.
func FormatPlaneTrust(peer, client []*x509.Certificate) string {
	p, c := FormatTrust(peer), FormatTrust(client)
	if p == c {
		return p
	}
	return "peer=" + p + ";client=" + c
}

// ParsePlaneTrust reads a v1alpha1.AnnotationTrust value of either form.
func ParsePlaneTrust(s string) (peer, client []string) {
	if !strings.Contains(s, "=") {
		t := ParseTrust(s)
		return t, t
	}
	for _, part := range strings.Split(s, ";") {
		if v, ok := strings.CutPrefix(part, "peer="); ok {
			peer = ParseTrust(v)
		} else if v, ok := strings.CutPrefix(part, "client="); ok {
			client = ParseTrust(v)
		}
	}
	return peer, client
}

// ParseTrust reads a v1alpha1.AnnotationTrust value.
func ParseTrust(s string) []string {
	if s == "" {
		return nil
	}
	fps := strings.Split(s, ",")
	slices.Sort(fps)
	return fps
}

func (f *Facts) names(member string) pki.MemberNames {
	return pki.MemberNames{Cluster: f.Cluster, Namespace: f.Namespace, Member: member, ClusterDomain: f.ClusterDomain}
}
