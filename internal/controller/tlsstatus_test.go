package controller

import (
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
