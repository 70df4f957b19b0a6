package controller

import (
	"context"
	"crypto/x509"
	"fmt"
	"math/big"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/internal/resources"
)

// writeCRL keeps the cluster's revocation list Secret (resources.CRLSecretName) listing every
// serial status.auth revoked, signed by the cluster's CA, for members that check it
// (resources.ServesCRL). It is written only when the serials differ from the list there (a
// signature is new every time, so rewriting a current list would be a write per reconcile), and
// before any member Pod needs it: Pods mount it required, so etcd never starts without one. It
// reports whether the Secret lists exactly the recorded serials.
func (r *EtcdClusterReconciler) writeCRL(ctx context.Context, ec *stewardv1.EtcdCluster, t *tlsObserved) (crlState, error) {
	if !resources.ServesCRL(ec) || t == nil {
		return crlState{}, nil
	}
	want := revokedSerials(ec)
	var cur corev1.Secret
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: ec.Namespace, Name: resources.CRLSecretName(ec.Name)}, &cur)
	switch {
	case err == nil:
		if listed, issued, ok := listedSerials(cur.Data[resources.KeyCRL]); ok && slices.Equal(listed, want) {
			return crlState{current: true, issued: issued}, nil
		}
	case !apierrors.IsNotFound(err):
		return crlState{}, err
	}
	ca := t.ca
	if w := t.decision.WriteCA; ca == nil && w != nil {
		ca = w.Current // the CA written this reconcile, before the first member Pods that mount the list
	}
	if ca == nil {
		return crlState{}, nil // no CA yet: written once there is one; member Pods wait for it
	}
	now := r.now()
	revoked := make([]pki.RevokedSerial, 0, len(want))
	for _, s := range want {
		n, _ := new(big.Int).SetString(s, 16)
		revoked = append(revoked, pki.RevokedSerial{Serial: n})
	}
	// The CRL number grows with every list: the issue time in seconds does.
	der, err := ca.RevocationList(revoked, now.Unix(), now, 0)
	if err != nil {
		return crlState{}, fmt.Errorf("the revocation list: %w", err)
	}
	if err := r.writeSecret(ctx, ec, resources.CRLSecretName(ec.Name), ec, func(s *corev1.Secret) error {
		s.Data = map[string][]byte{resources.KeyCRL: der}
		return nil
	}); err != nil {
		return crlState{}, err
	}
	r.event(ec, corev1.EventTypeNormal, "RevocationListWritten", "revocation list %s written: %d revoked certificate(s)",
		resources.CRLSecretName(ec.Name), len(want))
	return crlState{current: true, issued: time.Unix(now.Unix(), 0)}, nil
}

// crlState is what writeCRL left: whether the Secret lists exactly the recorded serials, and when
// that list was issued (its CRL number is the issue time in seconds).
type crlState struct {
	current bool
	issued  time.Time
}

// revokedSerials are the serials status.auth revoked that parse (hex), sorted and once each.
func revokedSerials(ec *stewardv1.EtcdCluster) []string {
	out := []string{}
	if ec.Status.Auth == nil {
		return out
	}
	for _, s := range ec.Status.Auth.RevokedSerials {
		if n, ok := new(big.Int).SetString(s, 16); ok && n.Sign() >= 0 {
			out = append(out, n.Text(16))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// listedSerials are the serials a DER revocation list holds, sorted, and when it was issued; false
// when it does not parse (then it is rewritten: etcd refuses every client on a list it cannot
// parse) or has no number.
func listedSerials(der []byte) ([]string, time.Time, bool) {
	l, err := x509.ParseRevocationList(der)
	if err != nil || l.Number == nil || !l.Number.IsInt64() {
		return nil, time.Time{}, false
	}
	out := []string{}
	for _, e := range l.RevokedCertificateEntries {
		out = append(out, e.SerialNumber.Text(16))
	}
	slices.Sort(out)
	return out, time.Unix(l.Number.Int64(), 0), true
}

// crlServed: every member's etcd runs with the revocation list, and the list holds every serial
// status recorded as revoked. Tenant users are created only then (authplan.Facts.CRLServed). A
// list just rewritten reaches the members' files within the kubelet's sync period; a name whose
// certificates were revoked comes back only after every member restarted (OpenSinceRevoke), and a
// restarted member mounts the current list.
func crlServed(ec *stewardv1.EtcdCluster, o *observed) bool {
	if !resources.ServesCRL(ec) || !o.crl.current || len(o.facts.Members) == 0 {
		return false
	}
	for _, m := range o.facts.Members {
		if !m.Pod.Exists || m.Pod.Deleting || !m.Pod.ServesCRL {
			return false
		}
	}
	return true
}

// openSinceRevoke: some member's Pod was created before the current revocation list was issued
// (or there is no list yet), so its etcd may hold a connection opened with a certificate the list
// now revokes, or mounted an older list. A Pod created after the list's issue mounted it.
func openSinceRevoke(o *observed) bool {
	if o.crl.issued.IsZero() {
		return true
	}
	for _, p := range o.pods {
		if p != nil && !p.CreationTimestamp.After(o.crl.issued) {
			return true
		}
	}
	return false
}
