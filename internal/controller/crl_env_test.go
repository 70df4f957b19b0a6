package controller_test

import (
	"context"
	"crypto/x509"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/controller"
	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/internal/resources"
)

// The revocation list Secret members mount: written for a cluster with spec.auth, before anything
// is revoked (etcd refuses every client without the file), signed by the cluster's CA, rewritten
// when status revokes a serial or the list there does not parse, and left alone otherwise (a
// settled cluster writes nothing).
func TestRevocationListSecret(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ca, err := pki.NewCA("demo", ns, time.Now().Add(-time.Hour), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	r := &controller.EtcdClusterReconciler{Client: env.Client}
	ec := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns, UID: types.UID("uid-demo")}}
	key := client.ObjectKey{Namespace: ns, Name: resources.CRLSecretName("demo")}
	read := func() (*corev1.Secret, []string) {
		t.Helper()
		var s corev1.Secret
		if err := env.Client.Get(ctx, key, &s); err != nil {
			t.Fatal(err)
		}
		l, err := x509.ParseRevocationList(s.Data[resources.KeyCRL])
		if err != nil {
			t.Fatalf("the Secret's list: %v", err)
		}
		if err := l.CheckSignatureFrom(ca.Cert); err != nil {
			t.Errorf("the list is not signed by the cluster's CA: %v", err)
		}
		serials := []string{}
		for _, e := range l.RevokedCertificateEntries {
			serials = append(serials, e.SerialNumber.Text(16))
		}
		return &s, serials
	}
	write := func(ca *pki.CA, want bool) {
		t.Helper()
		current, err := r.WriteCRL(ctx, ec, ca)
		if err != nil || current != want {
			t.Fatalf("WriteCRL = %v, %v; want %v", current, err, want)
		}
	}

	write(ca, false) // no spec.auth: no list
	if err := env.Client.Get(ctx, key, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a cluster without spec.auth got a revocation list Secret: %v", err)
	}
	ec.Spec.Auth = &stewardv1.AuthSpec{}
	write(nil, false) // no CA yet: nothing to sign with, nothing written
	if err := env.Client.Get(ctx, key, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a list was written without a CA: %v", err)
	}

	write(ca, true)
	first, serials := read()
	if len(serials) != 0 || first.OwnerReferences[0].UID != ec.UID {
		t.Errorf("first list: serials %v, owners %v; want an empty list owned by the cluster", serials, first.OwnerReferences)
	}
	write(ca, true)
	write(nil, true) // a CA not read this round: the current list stands
	if again, _ := read(); again.ResourceVersion != first.ResourceVersion {
		t.Errorf("a current list was rewritten (resourceVersion %s -> %s)", first.ResourceVersion, again.ResourceVersion)
	}

	ec.Status.Auth = &stewardv1.AuthStatus{RevokedSerials: []string{"1F", "a0", "1f", "not-hex"}}
	write(ca, true)
	second, serials := read()
	if !slices.Equal(serials, []string{"1f", "a0"}) || second.ResourceVersion == first.ResourceVersion {
		t.Errorf("after revoking 1f and a0: serials %v (rewritten: %v)", serials, second.ResourceVersion != first.ResourceVersion)
	}

	second.Data[resources.KeyCRL] = []byte("-----BEGIN X509 CRL-----\nnot DER\n-----END X509 CRL-----\n")
	if err := env.Client.Update(ctx, second); err != nil {
		t.Fatal(err)
	}
	write(ca, true)
	if _, serials := read(); !slices.Equal(serials, []string{"1f", "a0"}) {
		t.Errorf("a list etcd could not parse was not rewritten: serials %v", serials)
	}
}
