package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// Applied Certificates are re-applied when the spec changes and otherwise every few minutes,
// not on every reconcile.
func TestCertificatesFresh(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	r := &EtcdClusterReconciler{Clock: func() time.Time { return now }}
	ec := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{UID: "u1", Generation: 3}}
	if r.certificatesFresh(ec) {
		t.Fatal("never applied, yet fresh")
	}
	r.certificatesApplied.Store(ec.UID, certificatesRecord{generation: 3, at: now})
	if !r.certificatesFresh(ec) {
		t.Error("just applied for this generation, yet not fresh")
	}
	ec.Generation = 4
	if r.certificatesFresh(ec) {
		t.Error("a new spec generation must re-apply")
	}
	ec.Generation = 3
	now = now.Add(certificatesRefresh)
	if r.certificatesFresh(ec) {
		t.Errorf("not re-applied after %s", certificatesRefresh)
	}
}
