//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/internal/resources"
)

// cert-manager (built from the module proxy, started by hack/e2e.sh) issues the certificates of a
// CertManager cluster from a CA Issuer: the cluster comes up on them, serves clients with the
// application Secret cert-manager wrote, and its members present cert-manager's leaves.
func TestTLSCertManager(t *testing.T) {
	t.Parallel()
	ns := f.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, obj := range []map[string]any{
		{"kind": "Issuer", "metadata": map[string]any{"name": "selfsigned"}, "spec": map[string]any{"selfSigned": map[string]any{}}},
		{"kind": "Certificate", "metadata": map[string]any{"name": "root"}, "spec": map[string]any{
			"isCA": true, "commonName": "e2e root", "secretName": "root", "duration": "24h",
			"privateKey": map[string]any{"algorithm": "ECDSA", "size": int64(256)},
			"issuerRef":  map[string]any{"name": "selfsigned", "kind": "Issuer", "group": "cert-manager.io"}}},
		{"kind": "Issuer", "metadata": map[string]any{"name": "ca"}, "spec": map[string]any{"ca": map[string]any{"secretName": "root"}}},
	} {
		u := &unstructured.Unstructured{Object: obj}
		u.SetAPIVersion("cert-manager.io/v1")
		u.SetNamespace(ns)
		if err := f.Client.Create(ctx, u); err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	issuer := &stewardv1.IssuerRef{Name: "ca", Kind: "Issuer", Group: "cert-manager.io"}
	create(t, newCluster(ns, "cm", 3, "", func(ec *stewardv1.EtcdCluster) {
		ec.Spec.TLS = &stewardv1.TLSSpec{
			Peer:   stewardv1.TLSPlane{Source: stewardv1.TLSSourceCertManager, IssuerRef: issuer},
			Client: stewardv1.TLSPlane{Source: stewardv1.TLSSourceCertManager, IssuerRef: issuer},
		}
	}))
	measure(t, "cert-manager source: apply to settled, 3 PVC", waitSettled(t, ns, "cm", 3, 5*time.Minute))
	data := putData(t, clientFor(t, ns, "cm"), "/cm/", 10)
	checkData(t, clientFor(t, ns, "cm"), "/cm/", data)

	root := secretCert(t, ns, "root", pki.KeyCert)
	for _, m := range memberNames("cm", 3) {
		leaf := secretCert(t, ns, resources.MemberTLSSecretName(m), resources.KeyServerCert)
		if err := leaf.CheckSignatureFrom(root); err != nil {
			t.Errorf("%s's server certificate is not from the cert-manager CA Issuer: %v", m, err)
		}
	}
	if app := secretCert(t, ns, resources.ClientTLSSecretName("cm"), pki.KeyCert); app.CheckSignatureFrom(root) != nil {
		t.Error("the application client certificate is not from the cert-manager CA Issuer")
	}
}
