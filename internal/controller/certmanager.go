package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
)

// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;list;watch;create;update;patch;delete

// certificateGVK is cert-manager's Certificate. Steward talks to it unstructured: cert-manager is
// optional, and its Go API would pull its whole module into the operator.
var certificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}

// certManagerSource says whether cert-manager issues the cluster's certificates.
func certManagerSource(ec *stewardv1.EtcdCluster) bool {
	return ec.Spec.TLS != nil && ec.Spec.TLS.Peer.Source == stewardv1.TLSSourceCertManager
}

// Secret names cert-manager writes for a cluster (source CertManager).
func certManagerPeerSecret(cluster string) string   { return cluster + "-cm-peer" }
func certManagerServerSecret(cluster string) string { return cluster + "-cm-server" }

// userSecretNames are the Secrets the planes' material is read from: the user's (source Secret)
// or cert-manager's (source CertManager).
func userSecretNames(ec *stewardv1.EtcdCluster) (peer, server string) {
	if certManagerSource(ec) {
		return certManagerPeerSecret(ec.Name), certManagerServerSecret(ec.Name)
	}
	return ec.Spec.TLS.Peer.SecretName, ec.Spec.TLS.Client.SecretName
}

// ensureCertificates asks cert-manager for the peer and server certificates (one each, covering
// every member by wildcard) and the applications' client certificate. A missing cert-manager is
// reported as a message: the cluster holds, nothing is touched.
func (r *EtcdClusterReconciler) ensureCertificates(ctx context.Context, ec *stewardv1.EtcdCluster) (string, error) {
	if r.certificatesFresh(ec) {
		return "", nil
	}
	t := ec.Spec.TLS
	leaf, _, fraction, domain := tlsSettings(ec)
	members := "*." + resources.PeerServiceName(ec.Name) + "." + ec.Namespace + ".svc"
	svc := resources.ClientServiceName(ec.Name)
	certs := []struct {
		name, secret string
		issuer       *stewardv1.IssuerRef
		dns, usages  []string
	}{
		{ec.Name + "-peer", certManagerPeerSecret(ec.Name), t.Peer.IssuerRef,
			[]string{members, members + "." + domain}, []string{"server auth", "client auth", "digital signature", "key encipherment"}},
		{ec.Name + "-server", certManagerServerSecret(ec.Name), t.Client.IssuerRef,
			[]string{members, members + "." + domain, svc, svc + "." + ec.Namespace, svc + "." + ec.Namespace + ".svc",
				svc + "." + ec.Namespace + ".svc." + domain, "localhost"},
			[]string{"server auth", "client auth", "digital signature", "key encipherment"}},
		{ec.Name + "-client", resources.ClientTLSSecretName(ec.Name), t.Client.IssuerRef, nil,
			[]string{"client auth", "digital signature", "key encipherment"}},
	}
	for _, c := range certs {
		spec := map[string]any{
			"secretName":            c.secret,
			"commonName":            c.name,
			"duration":              leaf.String(),
			"renewBeforePercentage": int64((1 - fraction) * 100),
			"usages":                toAny(c.usages),
			"privateKey":            map[string]any{"algorithm": "ECDSA", "size": int64(256), "rotationPolicy": "Always"},
			"issuerRef":             map[string]any{"name": c.issuer.Name, "kind": c.issuer.Kind, "group": c.issuer.Group},
		}
		if len(c.dns) > 0 {
			spec["dnsNames"] = toAny(c.dns)
		}
		if err := r.applyCertificate(ctx, ec, c.name, spec); err != nil {
			if meta.IsNoMatchError(err) || strings.Contains(err.Error(), "no matches for kind") {
				return "cert-manager is not installed (no cert-manager.io/v1 Certificate kind), and spec.tls names it as the source " +
					"of the certificates: install cert-manager, or recreate the cluster with another source", nil
			}
			return "", err
		}
	}
	r.certificatesApplied.Store(ec.UID, certificatesRecord{generation: ec.Generation, at: r.now()})
	return "", nil
}

// certificatesRefresh bounds how long applied Certificates go unchecked: they follow the spec, so
// they are re-applied when its generation changes, and otherwise now and then in case someone
// edited or deleted one. Checking on every reconcile would cost three uncached reads each time.
const certificatesRefresh = 5 * time.Minute

type certificatesRecord struct {
	generation int64
	at         time.Time
}

func (r *EtcdClusterReconciler) certificatesFresh(ec *stewardv1.EtcdCluster) bool {
	v, ok := r.certificatesApplied.Load(ec.UID)
	if !ok {
		return false
	}
	rec := v.(certificatesRecord)
	return rec.generation == ec.Generation && r.now().Sub(rec.at) < certificatesRefresh
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// applyCertificate creates the Certificate, or updates its spec when it differs.
func (r *EtcdClusterReconciler) applyCertificate(ctx context.Context, ec *stewardv1.EtcdCluster, name string, spec map[string]any) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(certificateGVK)
	u.SetNamespace(ec.Namespace)
	u.SetName(name)
	u.SetLabels(map[string]string{stewardv1.LabelCluster: ec.Name, resources.LabelManagedBy: "steward"})
	u.Object["spec"] = spec
	if err := controllerutil.SetControllerReference(ec, u, r.Client.Scheme()); err != nil {
		return err
	}
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(certificateGVK)
	err := r.reader().Get(ctx, client.ObjectKeyFromObject(u), cur)
	if apierrors.IsNotFound(err) {
		return r.Client.Create(ctx, u)
	}
	if err != nil {
		return err
	}
	// Compare through JSON-normal forms: the server returns numbers as int64 and adds nothing
	// to spec (cert-manager has no defaulting webhook here), so an unchanged spec is equal.
	if equality.Semantic.DeepEqual(cur.Object["spec"], u.Object["spec"]) {
		return nil
	}
	cur.Object["spec"] = spec
	if err := r.Client.Update(ctx, cur); err != nil {
		return fmt.Errorf("updating Certificate %s: %w", name, err)
	}
	return nil
}
