package controller

import (
	"context"
	"crypto/x509"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/internal/resources"
	"github.com/etcd-steward/steward/internal/tlsplan"
)

// LabelAuthUser marks a user's certificate Secret with the user's name, so Secrets of users no
// longer declared are found and retired.
const LabelAuthUser = "steward.dev/auth-user"

// userCertificates keeps a client certificate Secret (UserSecretName, CN = the user) for every
// declared user that exists in etcd, issued like the shared client's (same CA during a rotation,
// same trust bundle, renewed at the same fraction), and retires the Secrets of users no longer
// declared. Every certificate is recorded in status.auth.certificates before one replaces it, so a
// renewed-away copy a client kept is revoked with the user too; a removed user's certificates all
// go to status.auth.revokedSerials, and its Secret is deleted only once the revocation list holds
// them. A Secret is issued only for a user etcd has: a certificate for a name that does not exist
// would work the day someone creates it.
func (r *EtcdClusterReconciler) userCertificates(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed, t *tlsObserved) error {
	if ec.Spec.Auth == nil || !resources.ServesCRL(ec) || t == nil {
		return nil
	}
	if ec.Status.Auth == nil {
		ec.Status.Auth = &stewardv1.AuthStatus{}
	}
	st := ec.Status.Auth
	recorded := map[string]bool{} // serials status held when this reconcile read it
	for _, c := range st.Certificates {
		recorded[c.Serial] = true
	}
	revokedBefore := map[string]bool{}
	for _, s := range st.RevokedSerials {
		revokedBefore[s] = true
	}
	now := r.now()
	st.Certificates = slices.DeleteFunc(st.Certificates, func(c stewardv1.AuthCertificate) bool { return !c.NotAfter.After(now) })
	pruneRevoked(st, now)

	if o.auth.Etcd.Err == nil {
		// A revoked name declared again that etcd has again was created once the members were
		// fresh (or never left): nothing to hold. One no longer declared stays until it is gone.
		st.RevokedUsers = slices.DeleteFunc(st.RevokedUsers, func(name string) bool {
			_, exists := o.auth.Etcd.Users[name]
			return exists && slices.ContainsFunc(ec.Spec.Auth.Users, func(u stewardv1.AuthUser) bool { return u.Name == name })
		})
	}
	secrets, err := r.userSecrets(ctx, ec)
	if err != nil {
		return err
	}
	declared := map[string]bool{}
	issuer, bundle := userIssuer(t)
	leafLife, _, fraction, _ := tlsSettings(ec)
	for _, u := range ec.Spec.Auth.Users {
		declared[u.Name] = true
		if _, inEtcd := o.auth.Etcd.Users[u.Name]; !inEtcd || o.auth.Etcd.Err != nil {
			continue
		}
		leaf, reissue, rebundle := clientLeafState(secrets[u.Name], issuer, bundle, now, fraction)
		if leaf != nil {
			recordCertificate(st, u.Name, leaf)
		}
		if issuer == nil {
			continue // no shared client certificate to follow yet
		}
		if reissue && leaf != nil && !recorded[leaf.Cert.SerialNumber.Text(16)] {
			continue // the current certificate is recorded first (this reconcile's status); replaced next time
		}
		if !reissue && !rebundle {
			continue
		}
		if reissue {
			if leaf, err = issuer.IssueClient(u.Name, now, leafLife); err != nil {
				return err
			}
			recordCertificate(st, u.Name, leaf)
		}
		if err := r.writeSecret(ctx, ec, UserSecretName(ec.Name, u.Name), ec, func(s *corev1.Secret) error {
			s.Labels[LabelAuthUser] = u.Name
			return fillClientSecret(s, &tlsplan.Material{Leaf: leaf, Trust: bundle})
		}); err != nil {
			return err
		}
	}

	// Users no longer declared: every certificate revoked, then the Secret goes.
	gone := map[string]bool{}
	for name := range secrets {
		gone[name] = !declared[name]
	}
	for _, c := range st.Certificates {
		if !declared[c.User] {
			gone[c.User] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(gone)) {
		if !gone[name] {
			continue
		}
		held := heldCertificates(st, name, secrets[name])
		revoke(st, name, held, now)
		all := true
		for _, serial := range serialsOf(stillAccepted(held, now)) {
			all = all && revokedBefore[serial]
		}
		if !all || !o.crl.current {
			continue // the revocation list takes the serials first
		}
		if s := secrets[name]; s != nil {
			if err := r.Client.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
		st.Certificates = slices.DeleteFunc(st.Certificates, func(c stewardv1.AuthCertificate) bool { return c.User == name })
	}
	return nil
}

// userSecrets are the cluster's user certificate Secrets, by user.
func (r *EtcdClusterReconciler) userSecrets(ctx context.Context, ec *stewardv1.EtcdCluster) (map[string]*corev1.Secret, error) {
	var list corev1.SecretList
	if err := r.Client.List(ctx, &list, client.InNamespace(ec.Namespace),
		client.MatchingLabels{stewardv1.LabelCluster: ec.Name}, client.HasLabels{LabelAuthUser}); err != nil {
		return nil, err
	}
	out := map[string]*corev1.Secret{}
	for i := range list.Items {
		s := &list.Items[i]
		if name := s.Labels[LabelAuthUser]; s.Name == UserSecretName(ec.Name, name) && metav1.IsControlledBy(s, ec) {
			out[name] = s
		}
	}
	return out, nil
}

// userIssuer is the CA that signed the shared client certificate and that Secret's trust bundle:
// users' certificates follow it through a CA rotation. nil before there is one.
func userIssuer(t *tlsObserved) (*pki.CA, []*x509.Certificate) {
	app := t.appSecret
	if app == nil {
		return nil, nil
	}
	leaf := parseLeaf(app.Data[pki.KeyCert], app.Data[pki.KeyKey])
	bundle, err := pki.ParseBundle(app.Data[pki.KeyCA])
	if leaf == nil || err != nil {
		return nil, nil
	}
	for _, ca := range []*pki.CA{t.ca, t.next} {
		if ca != nil && leaf.Cert.CheckSignatureFrom(ca.Cert) == nil {
			return ca, bundle
		}
	}
	return nil, nil
}

func recordCertificate(st *stewardv1.AuthStatus, user string, leaf *pki.Leaf) {
	serial := leaf.Cert.SerialNumber.Text(16)
	if slices.ContainsFunc(st.Certificates, func(c stewardv1.AuthCertificate) bool { return c.Serial == serial }) {
		return
	}
	st.Certificates = append(st.Certificates, stewardv1.AuthCertificate{User: user, Serial: serial, NotAfter: metav1.NewTime(leaf.Cert.NotAfter)})
}

// revocationMargin is how long a serial stays on the revocation list after its certificate
// expired: a member whose clock runs behind the operator's still accepts it until then.
const revocationMargin = time.Hour

// heldCertificates are the certificates the user holds or held: recorded ones and the one its
// Secret holds now, sorted by serial.
func heldCertificates(st *stewardv1.AuthStatus, user string, s *corev1.Secret) []stewardv1.AuthCertificate {
	var out []stewardv1.AuthCertificate
	if st != nil {
		for _, c := range st.Certificates {
			if c.User == user {
				out = append(out, c)
			}
		}
	}
	if s != nil {
		if leaf := parseLeaf(s.Data[pki.KeyCert], s.Data[pki.KeyKey]); leaf != nil {
			serial := leaf.Cert.SerialNumber.Text(16)
			if !slices.ContainsFunc(out, func(c stewardv1.AuthCertificate) bool { return c.Serial == serial }) {
				out = append(out, stewardv1.AuthCertificate{User: user, Serial: serial, NotAfter: metav1.NewTime(leaf.Cert.NotAfter)})
			}
		}
	}
	slices.SortFunc(out, func(a, b stewardv1.AuthCertificate) int { return strings.Compare(a.Serial, b.Serial) })
	return out
}

// stillAccepted are the certificates a member may still accept at now: one past its expiry and the
// margin needs no revocation (and is not revoked again once pruned).
func stillAccepted(cs []stewardv1.AuthCertificate, now time.Time) []stewardv1.AuthCertificate {
	return slices.DeleteFunc(slices.Clone(cs), func(c stewardv1.AuthCertificate) bool { return expiredForGood(c, now) })
}

// expiredForGood: no member accepts the certificate any more, whatever its clock's lag.
func expiredForGood(c stewardv1.AuthCertificate, now time.Time) bool {
	return now.After(c.NotAfter.Add(revocationMargin))
}

func serialsOf(cs []stewardv1.AuthCertificate) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Serial)
	}
	return out
}

// clientLeafState reads a client certificate Secret Steward keeps: its certificate (nil when missing
// or broken), whether it needs a new one (none, renewal due, or not from issuer: a CA rotation
// moved on) and whether only its trust bundle is behind.
func clientLeafState(s *corev1.Secret, issuer *pki.CA, bundle []*x509.Certificate, now time.Time, fraction float64) (*pki.Leaf, bool, bool) {
	if s == nil {
		return nil, true, false
	}
	leaf := parseLeaf(s.Data[pki.KeyCert], s.Data[pki.KeyKey])
	if leaf == nil {
		return nil, true, false
	}
	reissue := pki.RenewalDue(leaf.Cert, now, fraction) || (issuer != nil && leaf.Cert.CheckSignatureFrom(issuer.Cert) != nil)
	return leaf, reissue, !reissue && !sameBundle(s.Data[pki.KeyCA], bundle)
}

// sameBundle: a Secret's trust bundle holds exactly the given CAs.
func sameBundle(data []byte, bundle []*x509.Certificate) bool {
	have, err := pki.ParseBundle(data)
	return err == nil && slices.Equal(pki.Fingerprints(have), pki.Fingerprints(bundle))
}

// revoke records the certificates a member may still accept as revoked (serial and expiry) and,
// when the user held any at all, the user among those whose name comes back only after every
// member restarted: a connection opened before a certificate expired stays open, as one opened
// before its revocation does.
func revoke(st *stewardv1.AuthStatus, user string, held []stewardv1.AuthCertificate, now time.Time) {
	for _, c := range stillAccepted(held, now) {
		if !slices.Contains(st.RevokedSerials, c.Serial) {
			st.RevokedSerials = append(st.RevokedSerials, c.Serial)
		}
		if !slices.ContainsFunc(st.RevokedCertificates, func(r stewardv1.AuthCertificate) bool { return r.Serial == c.Serial }) {
			st.RevokedCertificates = append(st.RevokedCertificates, c)
		}
	}
	if len(held) > 0 && !slices.Contains(st.RevokedUsers, user) {
		st.RevokedUsers = append(st.RevokedUsers, user)
	}
}

// pruneRevoked drops the serials of revoked certificates that expired for good from the revocation
// list's record. Serials without a recorded expiry (revoked before it was recorded) stay.
func pruneRevoked(st *stewardv1.AuthStatus, now time.Time) {
	var gone []string
	st.RevokedCertificates = slices.DeleteFunc(st.RevokedCertificates, func(c stewardv1.AuthCertificate) bool {
		if expiredForGood(c, now) {
			gone = append(gone, c.Serial)
			return true
		}
		return false
	})
	st.RevokedSerials = slices.DeleteFunc(st.RevokedSerials, func(s string) bool { return slices.Contains(gone, s) })
}
