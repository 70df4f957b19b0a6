package controller

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/adoption"
	"github.com/etcd-steward/steward/internal/etcd"
	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/internal/resources"
	"github.com/etcd-steward/steward/internal/tlsplan"
)

// tlsObserved is what one reconcile read and decided about a cluster's certificates.
type tlsObserved struct {
	ca, next *pki.CA
	caSecret *corev1.Secret // nil when missing
	caErr    error
	// user is the validated content of the user's Secrets (source Secret); userMsg says what is
	// wrong with them instead.
	user    *tlsplan.UserTLS
	userMsg string
	// sourceCA is the adopted TLS source's CA as taken (spec.bootstrap.join.caSecretName), for the
	// adoption's preflight; zero otherwise.
	sourceCA adoption.CA
	// appSecret is the application client Secret as read, nil when missing.
	appSecret *corev1.Secret
	// secrets are the members' TLS Secrets as they stand after this reconcile's writes.
	secrets  map[string]*corev1.Secret
	decision tlsplan.Decision
}

// tlsSettings are spec.tls with defaults applied.
func tlsSettings(ec *stewardv1.EtcdCluster) (leaf, ca time.Duration, fraction float64, domain string) {
	leaf, ca, fraction, domain = pki.DefaultLeafLifetime, pki.DefaultCALifetime, pki.DefaultRenewFraction, pki.DefaultClusterDomain
	t := ec.Spec.TLS
	if t == nil {
		return leaf, ca, fraction, domain
	}
	if t.CertificateDuration != nil {
		leaf = t.CertificateDuration.Duration
	}
	if t.CADuration != nil {
		ca = t.CADuration.Duration
	}
	if t.RenewBeforePercentage != nil {
		fraction = 1 - float64(*t.RenewBeforePercentage)/100
	}
	if t.ClusterDomain != "" {
		domain = t.ClusterDomain
	}
	return leaf, ca, fraction, domain
}

// prepareTLS loads the CA Secret and points the operator's etcd credentials at it, before any
// etcd call of this reconcile.
func (r *EtcdClusterReconciler) prepareTLS(ctx context.Context, ec *stewardv1.EtcdCluster) (*tlsObserved, error) {
	t := &tlsObserved{secrets: map[string]*corev1.Secret{}}
	if userSource(ec) {
		names, err := r.memberNames(ctx, ec)
		if err != nil {
			return nil, err
		}
		if t.user, t.userMsg, err = r.loadUser(ctx, ec, names); err != nil {
			return nil, err
		}
		return t, r.userCredentials(ctx, ec, t.user)
	}
	var live *corev1.Secret
	var err error
	if t.sourceCA, live, err = r.takeSourceCA(ctx, ec); err != nil {
		return nil, err
	}
	if t.sourceCA.Err != "" {
		// Hold: a CA of Steward's own would give its members certificates the source refuses.
		t.caErr = fmt.Errorf("adopting a TLS source: its CA (Secret %s): %s", t.sourceCA.Secret, t.sourceCA.Err)
		return t, nil
	}
	s := live
	if s == nil {
		s = &corev1.Secret{}
		err = r.Client.Get(ctx, client.ObjectKey{Namespace: ec.Namespace, Name: resources.CASecretName(ec.Name)}, s)
		switch {
		case apierrors.IsNotFound(err):
			return t, nil
		case err != nil:
			return nil, err
		}
	}
	t.caSecret = s
	if t.ca, t.next, err = parseCASecret(s); err != nil {
		t.caErr = fmt.Errorf("the CA Secret %s: %w", s.Name, err)
		return t, nil
	}
	r.refreshCredentials(ec, t.ca, t.next)
	return t, nil
}

// refreshCredentials gives the operator a client certificate from each CA members may trust,
// keeping the ones still good.
func (r *EtcdClusterReconciler) refreshCredentials(ec *stewardv1.EtcdCluster, cas ...*pki.CA) {
	creds := r.Etcd.Credentials(string(ec.UID))
	leafLife, _, fraction, _ := tlsSettings(ec)
	now := r.now()
	var certs []tls.Certificate
	for _, ca := range cas {
		if ca == nil {
			continue
		}
		kept := false
		for _, c := range creds.Certs() {
			if c.Leaf.CheckSignatureFrom(ca.Cert) == nil && !pki.RenewalDue(c.Leaf, now, fraction) {
				certs, kept = append(certs, c), true
				break
			}
		}
		if kept {
			continue
		}
		leaf, err := ca.IssueClient("steward-operator", now, leafLife)
		if err != nil {
			continue // the plan reports the CA's state; connections then fail as facts
		}
		certs = append(certs, tls.Certificate{Certificate: [][]byte{leaf.Cert.Raw}, PrivateKey: leaf.Key, Leaf: leaf.Cert})
	}
	creds.Set(certsOf(cas...), certs)
}

// reconcileTLS decides this reconcile's certificate work, writes the Secrets (CA first, then
// members, then the application client) and tells the plan what it may do.
func (r *EtcdClusterReconciler) reconcileTLS(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed, t *tlsObserved) error {
	hold := t.userMsg
	if t.caErr != nil {
		hold = t.caErr.Error()
	}
	if hold != "" {
		o.facts.TLS.Hold = hold
		t.decision = tlsplan.Decision{Hold: hold, Pass: pki.Done}
		return nil
	}
	f, err := r.tlsFacts(ctx, ec, o, t)
	if err != nil {
		return err
	}
	d := tlsplan.Decide(f)
	t.decision = d
	if err := r.writeTLS(ctx, ec, o, t); err != nil {
		return err
	}
	o.facts.TLS.Hold, o.facts.TLS.Pending, o.facts.TLS.AwaitingClients = d.Hold, d.Pending, d.AwaitingClients != nil
	for i := range o.facts.Members {
		o.facts.Members[i].TrustOutdated = d.TrustOutdated[o.facts.Members[i].Name]
	}
	return nil
}

func (r *EtcdClusterReconciler) tlsFacts(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed, t *tlsObserved) (tlsplan.Facts, error) {
	leaf, caLife, fraction, domain := tlsSettings(ec)
	f := tlsplan.Facts{Cluster: ec.Name, Namespace: ec.Namespace, ClusterDomain: domain, Now: r.now(),
		LeafLifetime: leaf, CALifetime: caLife, RenewFraction: fraction, CA: t.ca, NextCA: t.next,
		CASecret: resources.CASecretName(ec.Name), User: t.user}
	if ec.Spec.TLS != nil && ec.Spec.TLS.RotateCA != "" && t.caSecret != nil {
		f.RotateRequested = t.caSecret.Annotations[stewardv1.AnnotationRotateCA] != ec.Spec.TLS.RotateCA
	}
	if adopting(ec) {
		f.RotationHold = "the adoption is under way (the source's members trust only the source's CA)"
	}
	if ec.Spec.TLS != nil {
		f.ApproveDropOldCA = ec.Spec.TLS.ApproveDropOldCA
		if ec.Spec.TLS.DropOldCAAfter != nil {
			f.ClientGrace = ec.Spec.TLS.DropOldCAAfter.Duration
		}
	}
	served := r.servedLeaves(ctx, ec, o)
	var servedPeer map[string]*x509.Certificate
	if t.user != nil { // the user's planes change apart, so the peer port is asked too
		servedPeer = servedPeerLeaves(ctx, o)
	}
	for _, name := range slices.Sorted(maps.Keys(o.members)) {
		m := tlsplan.Member{Name: name}
		var s corev1.Secret
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: ec.Namespace, Name: resources.MemberTLSSecretName(name)}, &s)
		switch {
		case err == nil:
			t.secrets[name] = &s
			m.Secret = parseMemberSecret(&s)
		case !apierrors.IsNotFound(err):
			return f, err
		}
		if p := o.pods[name]; p != nil && p.DeletionTimestamp == nil {
			peer, client := tlsplan.ParsePlaneTrust(p.Annotations[stewardv1.AnnotationTrust])
			m.Pod = &tlsplan.Pod{Trust: peer, ClientTrust: client, Served: served[name], ServedPeer: servedPeer[name]}
		}
		f.Members = append(f.Members, m)
	}
	var s corev1.Secret
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: ec.Namespace, Name: resources.ClientTLSSecretName(ec.Name)}, &s)
	switch {
	case err == nil:
		t.appSecret = &s
		f.AppClient = parseClientSecret(&s)
		if since, err := time.Parse(time.RFC3339, s.Annotations[stewardv1.AnnotationBundleSince]); err == nil {
			f.AppBundleSince = since
		}
	case !apierrors.IsNotFound(err):
		return f, err
	}
	return f, nil
}

// servedLeaves records the leaf each member presents on its client port, verified as the
// operator's own connections are.
func (r *EtcdClusterReconciler) servedLeaves(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed) map[string]*x509.Certificate {
	creds := r.Etcd.Credentials(string(ec.UID))
	return dialMembers(o, resources.ClientPort, func(addr string) (*x509.Certificate, error) {
		return etcd.Served(ctx, addr, creds)
	})
}

// memberNames are the cluster's members and the ones spec.replicas asks for: the names a user's
// certificate must cover.
func (r *EtcdClusterReconciler) memberNames(ctx context.Context, ec *stewardv1.EtcdCluster) ([]string, error) {
	var list stewardv1.EtcdMemberList
	if err := r.Client.List(ctx, &list, client.InNamespace(ec.Namespace)); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, m := range list.Items {
		if m.Spec.ClusterName == ec.Name {
			add(m.Name)
		}
	}
	replicas := int32(3)
	if ec.Spec.Replicas != nil {
		replicas = *ec.Spec.Replicas
	}
	for i := range replicas {
		add(resources.MemberName(ec.Name, i))
	}
	return out, nil
}

// writeTLS carries out the decision's writes, CA first: every later write assumes it.
func (r *EtcdClusterReconciler) writeTLS(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed, t *tlsObserved) error {
	d := &t.decision
	if d.WriteCA != nil {
		rotate := rotateToken(ec, t)
		fill := func(s *corev1.Secret) error { return fillCASecret(s, d.WriteCA, rotate) }
		if t.caSecret == nil {
			// A first CA is only created: a CA Secret the cache has not shown yet (written a
			// moment ago, or taken from an adopted source) is never replaced by a fresh one.
			if _, err := r.createSecret(ctx, ec, resources.CASecretName(ec.Name), fill); err != nil {
				return err
			}
		} else if err := r.writeSecret(ctx, ec, resources.CASecretName(ec.Name), ec, fill); err != nil {
			return err
		}
		r.event(ec, corev1.EventTypeNormal, "CAUpdated", "CA Secret %s written (rotation pass %s)", resources.CASecretName(ec.Name), d.Pass)
		r.refreshCredentials(ec, d.WriteCA.Current, d.WriteCA.Next)
	}
	for _, w := range d.WriteMembers {
		m := o.members[w.Name]
		s, err := r.writeSecretObj(ctx, ec, resources.MemberTLSSecretName(w.Name), m, func(s *corev1.Secret) error {
			return fillMemberSecret(s, &w.Secret)
		})
		if err != nil {
			return err
		}
		t.secrets[w.Name] = s
	}
	if d.WriteAppClient != nil {
		if err := r.writeSecret(ctx, ec, resources.ClientTLSSecretName(ec.Name), ec, func(s *corev1.Secret) error {
			if err := fillClientSecret(s, d.WriteAppClient); err != nil {
				return err
			}
			// Record when the bundle changed: SwapLeaves gives applications time to load it.
			since := r.now().UTC().Format(time.RFC3339)
			if prev := t.appSecret; prev != nil && string(prev.Data[pki.KeyCA]) == string(s.Data[pki.KeyCA]) && prev.Annotations[stewardv1.AnnotationBundleSince] != "" {
				since = prev.Annotations[stewardv1.AnnotationBundleSince]
			}
			s.Annotations = map[string]string{stewardv1.AnnotationBundleSince: since}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// rotateToken is the rotateCA value to record with the CA Secret: the spec's when the CA is
// created (a value set at creation asks for nothing) or a rotation starts for it, else the one
// already recorded (automatic rotations and their completion keep it).
func rotateToken(ec *stewardv1.EtcdCluster, t *tlsObserved) string {
	if t.caSecret != nil && !t.decision.RotationStarted {
		return t.caSecret.Annotations[stewardv1.AnnotationRotateCA]
	}
	if ec.Spec.TLS != nil {
		return ec.Spec.TLS.RotateCA
	}
	return ""
}

func (r *EtcdClusterReconciler) writeSecret(ctx context.Context, ec *stewardv1.EtcdCluster, name string, owner client.Object, fill func(*corev1.Secret) error) error {
	_, err := r.writeSecretObj(ctx, ec, name, owner, fill)
	return err
}

// createSecret creates a Secret owned by the cluster, and never replaces one: one that exists
// already is read on the next reconcile (errRetry).
func (r *EtcdClusterReconciler) createSecret(ctx context.Context, ec *stewardv1.EtcdCluster, name string, fill func(*corev1.Secret) error) (*corev1.Secret, error) {
	s := tlsSecret(ec, name)
	if err := fill(s); err != nil {
		return nil, err
	}
	if err := controllerutil.SetControllerReference(ec, s, r.Client.Scheme()); err != nil {
		return nil, err
	}
	if err := r.Client.Create(ctx, s); apierrors.IsAlreadyExists(err) {
		return nil, errRetry
	} else if err != nil {
		return nil, err
	}
	return s, nil
}

// writeSecretObj creates or replaces a Secret owned by owner (the cluster, or a member so that its
// Secret goes with it on scale-down).
func (r *EtcdClusterReconciler) writeSecretObj(ctx context.Context, ec *stewardv1.EtcdCluster, name string, owner client.Object, fill func(*corev1.Secret) error) (*corev1.Secret, error) {
	s := tlsSecret(ec, name)
	if err := fill(s); err != nil {
		return nil, err
	}
	if err := controllerutil.SetControllerReference(owner, s, r.Client.Scheme()); err != nil {
		return nil, err
	}
	err := r.Client.Create(ctx, s)
	if apierrors.IsAlreadyExists(err) {
		var cur corev1.Secret
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(s), &cur); err != nil {
			return nil, err
		}
		cur.Data, cur.Annotations = s.Data, s.Annotations // the type is immutable
		cur.Labels, cur.OwnerReferences = s.Labels, s.OwnerReferences
		err = r.Client.Update(ctx, &cur)
		s = &cur
	}
	return s, err
}
