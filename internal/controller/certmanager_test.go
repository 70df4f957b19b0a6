package controller_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// The test API server has no cert-manager: a cluster that names it as its source holds with a
// condition saying so, and nothing is created (fail closed, invariant 6).
func TestCertManagerMissing(t *testing.T) {
	ns := namespace(t)
	issuer := &stewardv1.IssuerRef{Name: "ca", Kind: "Issuer", Group: "cert-manager.io"}
	ec := &stewardv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec: stewardv1.EtcdClusterSpec{Replicas: ptr.To[int32](3), MemberTemplate: stewardv1.MemberTemplate{Version: "3.6.16"},
			TLS: &stewardv1.TLSSpec{
				Peer:   stewardv1.TLSPlane{Source: stewardv1.TLSSourceCertManager, IssuerRef: issuer},
				Client: stewardv1.TLSPlane{Source: stewardv1.TLSSourceCertManager, IssuerRef: issuer},
			}},
	}
	if err := env.Client.Create(context.Background(), ec); err != nil {
		t.Fatal(err)
	}
	waitMaterialInvalid(t, ec, "cert-manager is not installed")
	time.Sleep(2 * time.Second)
	requireNoPods(t, ns, "cert-manager is missing")
}
