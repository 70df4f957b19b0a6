package controller

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/pki"
)

// TLS conditions.
const (
	// ConditionTLSMaterialValid is False while Steward holds every Pod start and disruption
	// because certificate material is missing or unsafe; the message names what.
	ConditionTLSMaterialValid = "TLSMaterialValid"
	// ConditionCertificatesExpiring is True when a certificate nears expiry and its renewal has
	// not reached the member (or the CA nears expiry with no rotation under way).
	ConditionCertificatesExpiring = "CertificatesExpiring"
)

// setTLSStatus shows the certificates' expiries, the rotation pass, and the TLS conditions.
func setTLSStatus(ec *stewardv1.EtcdCluster, t *tlsObserved) {
	d := t.decision
	s := &stewardv1.TLSStatus{}
	if t.caSecret != nil {
		s.RotateCA = t.caSecret.Annotations[stewardv1.AnnotationRotateCA]
	}
	if t.ca != nil {
		s.CANotAfter = &metav1.Time{Time: t.ca.Cert.NotAfter}
	}
	if d.Pass != pki.Done && d.Pass != "" {
		s.Rotation = string(d.Pass)
	}
	if w := d.AwaitingClients; w != nil {
		s.DropOldCA = &stewardv1.DropOldCAStatus{Approval: w.Approval, After: metav1.NewTime(w.Until), Message: w.Message}
	}
	for _, c := range d.Certificates {
		cs := stewardv1.CertificateStatus{Name: c.Name, NotAfter: metav1.NewTime(c.NotAfter), Served: c.Served}
		if !c.RenewAt.IsZero() {
			cs.RenewAt = &metav1.Time{Time: c.RenewAt}
		}
		s.Certificates = append(s.Certificates, cs)
	}
	if d.Hold != "" && len(s.Certificates) == 0 && ec.Status.TLS != nil {
		// A hold decides nothing about certificates; the last expiries seen stay shown.
		s.Certificates = ec.Status.TLS.Certificates
	}
	ec.Status.TLS = s
	if s.Rotation != "" && ec.Status.Rollout != nil && ec.Status.Rollout.Pass == "" {
		ec.Status.Rollout.Pass = "CARotation/" + s.Rotation
	}

	valid := metav1.Condition{Type: ConditionTLSMaterialValid, Status: metav1.ConditionTrue, Reason: "Valid",
		Message: "every member's certificates are issued and valid", ObservedGeneration: ec.Generation}
	if d.Hold != "" {
		valid.Status, valid.Reason, valid.Message = metav1.ConditionFalse, "MaterialNotReady", d.Hold
	}
	meta.SetStatusCondition(&ec.Status.Conditions, valid)
	expiring := metav1.Condition{Type: ConditionCertificatesExpiring, Status: metav1.ConditionFalse, Reason: "RenewedInTime",
		Message: "no certificate is near expiry without a renewal in place", ObservedGeneration: ec.Generation}
	if d.Expiring != "" {
		expiring.Status, expiring.Reason, expiring.Message = metav1.ConditionTrue, "NotRenewed", d.Expiring
	}
	if msg := onDeleteRotationWait(ec, t); msg != "" {
		expiring.Status, expiring.Reason, expiring.Message = metav1.ConditionTrue, ReasonRotationWaitsForPodDeletion, msg
	}
	meta.SetStatusCondition(&ec.Status.Conditions, expiring)
}

// ReasonRotationWaitsForPodDeletion: a CA rotation pass needs members restarted and
// updateStrategy is OnDelete, so it waits for the user to delete their Pods.
const ReasonRotationWaitsForPodDeletion = "RotationWaitsForPodDeletion"

// onDeleteRotationWait says what a CA rotation waits for under updateStrategy OnDelete, or "". An
// automatic rotation starts at the CA's renewal point, unannounced; with OnDelete it would stall
// there silently until the old CA expires and every handshake fails.
func onDeleteRotationWait(ec *stewardv1.EtcdCluster, t *tlsObserved) string {
	d := t.decision
	if ec.Spec.UpdateStrategy.Type != stewardv1.OnDelete || d.Pass == pki.Done || d.Pass == "" || len(d.TrustOutdated) == 0 {
		return ""
	}
	names := slices.Sorted(maps.Keys(d.TrustOutdated))
	msg := fmt.Sprintf("CA rotation pass %s needs %s restarted and updateStrategy is OnDelete: delete their Pods one at a "+
		"time, each once the cluster is healthy again", d.Pass, strings.Join(names, ", "))
	if t.ca != nil {
		msg += fmt.Sprintf("; the current CA expires at %s", t.ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return msg
}
