package controller

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/internal/tlsplan"
)

// Status shows the pass, the expiries and both conditions; a hold keeps the last expiries seen
// instead of blanking them, and names what holds.
func TestSetTLSStatus(t *testing.T) {
	now := time.Now()
	ec := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Generation: 4},
		Status: stewardv1.EtcdClusterStatus{Rollout: &stewardv1.RolloutStatus{}}}
	setTLSStatus(ec, &tlsObserved{decision: tlsplan.Decision{Pass: pki.SwapLeaves,
		Certificates: []tlsplan.Certificate{{Name: "db-0/server", NotAfter: now.Add(time.Hour), RenewAt: now, Served: true}},
		Expiring:     "db-0 serves a certificate that expires soon"}})
	s := ec.Status.TLS
	if s.Rotation != "SwapLeaves" || ec.Status.Rollout.Pass != "CARotation/SwapLeaves" || len(s.Certificates) != 1 || !s.Certificates[0].Served {
		t.Fatalf("status %+v rollout %+v", s, ec.Status.Rollout)
	}
	if !meta.IsStatusConditionTrue(ec.Status.Conditions, ConditionTLSMaterialValid) ||
		!meta.IsStatusConditionTrue(ec.Status.Conditions, ConditionCertificatesExpiring) {
		t.Fatalf("conditions %+v", ec.Status.Conditions)
	}

	setTLSStatus(ec, &tlsObserved{decision: tlsplan.Decision{Pass: pki.Done, Hold: "Secret x not found"}})
	c := meta.FindStatusCondition(ec.Status.Conditions, ConditionTLSMaterialValid)
	if c.Status != metav1.ConditionFalse || c.Message != "Secret x not found" || c.ObservedGeneration != 4 {
		t.Errorf("held condition %+v", c)
	}
	if ec.Status.TLS.Rotation != "" || len(ec.Status.TLS.Certificates) != 1 {
		t.Errorf("a hold blanked the expiries or kept the pass: %+v", ec.Status.TLS)
	}
	if meta.IsStatusConditionTrue(ec.Status.Conditions, ConditionCertificatesExpiring) {
		t.Error("Expiring stayed true without a warning")
	}
}

// A rotation waiting for clients shows the approval value, the deadline and what to do.
func TestSetTLSStatusDropOldCA(t *testing.T) {
	until := time.Date(2026, 3, 8, 12, 0, 0, 0, time.UTC)
	ec := &stewardv1.EtcdCluster{}
	w := &tlsplan.ClientWait{Approval: "0123456789ab", Until: until, Message: "restart clients ... then approve"}
	setTLSStatus(ec, &tlsObserved{decision: tlsplan.Decision{Pass: pki.DropOldCA, AwaitingClients: w}})
	s := ec.Status.TLS.DropOldCA
	if s == nil || s.Approval != w.Approval || !s.After.Time.Equal(until) || s.Message != w.Message || ec.Status.TLS.Rotation != "DropOldCA" {
		t.Fatalf("status %+v", ec.Status.TLS)
	}
	setTLSStatus(ec, &tlsObserved{decision: tlsplan.Decision{Pass: pki.DropOldCA}})
	if ec.Status.TLS.DropOldCA != nil {
		t.Error("the wait stayed in status after it ended")
	}
}

// Issue 10: with updateStrategy OnDelete, a CA rotation pass that needs restarts waits for the
// user's Pod deletions; the warning says so, names the Pods and when the CA expires, instead of
// staying silent while the rotation stalls.
func TestSetTLSStatusOnDeleteRotationWarns(t *testing.T) {
	expires := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	ec := &stewardv1.EtcdCluster{Spec: stewardv1.EtcdClusterSpec{
		UpdateStrategy: stewardv1.UpdateStrategy{Type: stewardv1.OnDelete}}}
	ca := &pki.CA{Cert: &x509.Certificate{NotAfter: expires}}
	d := tlsplan.Decision{Pass: pki.WidenTrust, TrustOutdated: map[string]bool{"db-2": true, "db-0": true}}
	setTLSStatus(ec, &tlsObserved{ca: ca, decision: d})
	c := meta.FindStatusCondition(ec.Status.Conditions, ConditionCertificatesExpiring)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonRotationWaitsForPodDeletion ||
		!strings.Contains(c.Message, "db-0, db-2") || !strings.Contains(c.Message, "2027-01-01") {
		t.Fatalf("CertificatesExpiring = %+v", c)
	}
	ec.Spec.UpdateStrategy.Type = stewardv1.RollingUpdate
	setTLSStatus(ec, &tlsObserved{ca: ca, decision: d})
	if meta.IsStatusConditionTrue(ec.Status.Conditions, ConditionCertificatesExpiring) {
		t.Errorf("RollingUpdate restarts the members itself: no warning")
	}
}
