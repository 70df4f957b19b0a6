package controller

import (
	"time"

	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/plan"
	"github.com/etcd-steward/steward/internal/resources"
)

// setStatus fills the cluster's status from the plan's decision and this reconcile's reads.
func (r *EtcdClusterReconciler) setStatus(ec *stewardv1.EtcdCluster, o *observed, d plan.Decision) {
	s := &ec.Status
	s.ObservedGeneration = ec.Generation
	if s.ClusterID == "" && o.clusterID != "" {
		s.ClusterID = o.clusterID // latched once: a different ID later holds everything (plan.identity)
	}
	s.Members = slices.Clone(d.Members)
	// The plan saw each member's defragmentation record as read before it ran; one this reconcile
	// wrote shows now, not a reconcile later (by then `kubectl etcd defrag` had already returned).
	for i := range s.Members {
		if m := o.members[s.Members[i].Name]; m != nil {
			s.Members[i].Defragmentation = m.Status.Defragmentation.DeepCopy()
		}
	}
	s.Replicas = int32(len(o.members))
	s.ReadyMembers = d.ReadyMembers
	s.UpdatedMembers = d.UpdatedMembers
	s.Rollout = d.Rollout
	s.LastStep = d.Step
	s.Adoption = d.Adoption
	s.Selector = labels.SelectorFromSet(resources.SelectorLabels(ec.Name)).String()
	s.CurrentTemplate = digest(s.Observed)
	setRecoveryStatus(s, d)
	for _, c := range d.Conditions {
		c.ObservedGeneration = ec.Generation
		meta.SetStatusCondition(&s.Conditions, c)
	}
	meta.SetStatusCondition(&s.Conditions, versionCondition(ec, d.VersionWarning))
	r.setRestoreStatus(ec, o)
	setAuthStatus(ec, o.auth, o.facts.Auth)
	if o.tls != nil {
		wasWaiting := ec.Status.TLS != nil && ec.Status.TLS.DropOldCA != nil
		wasOnDelete := expiringReason(ec) == ReasonRotationWaitsForPodDeletion
		setTLSStatus(ec, o.tls)
		if w := o.tls.decision.AwaitingClients; w != nil && !wasWaiting {
			// Once, when the wait starts: the user has to act (or let the grace run out).
			r.event(ec, corev1.EventTypeWarning, "CARotationWaitingForClients", "%s", w.Message)
		}
		if expiringReason(ec) == ReasonRotationWaitsForPodDeletion && !wasOnDelete {
			c := meta.FindStatusCondition(ec.Status.Conditions, ConditionCertificatesExpiring)
			r.event(ec, corev1.EventTypeWarning, ReasonRotationWaitsForPodDeletion, "%s", c.Message)
		}
	}
	if d.DeadlineExceeded && !wasDeadlineExceeded(ec) {
		r.event(ec, corev1.EventTypeWarning, "ProgressDeadlineExceeded", "%s", d.Action.Message)
	}
}

// ConditionVersionUnverified warns that Steward cannot check the version a custom image runs:
// the upgrade-step rules hold for spec.version, but the image's tag says something else (or
// nothing Steward can parse). Accepted, not refused: mirrors and custom builds are legitimate.
const ConditionVersionUnverified = "VersionUnverified"

func versionCondition(ec *stewardv1.EtcdCluster, planWarning string) metav1.Condition {
	c := metav1.Condition{Type: ConditionVersionUnverified, Status: metav1.ConditionFalse, Reason: "TagMatchesVersion",
		Message: "the image tag matches spec.version", ObservedGeneration: ec.Generation}
	if img := ec.Spec.Image; img != "" {
		if tag := imageTag(img); tag != "v"+ec.Spec.Version && tag != ec.Spec.Version {
			c.Status, c.Reason = metav1.ConditionTrue, "UnparsedImageTag"
			c.Message = fmt.Sprintf("spec.image %q is not tagged v%s: Steward cannot verify the etcd version it runs, "+
				"so the one-minor-step upgrade rule is only checked against spec.version", img, ec.Spec.Version)
		}
	}
	if planWarning != "" {
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, "UnparsedVersion", planWarning
	}
	return c
}

// imageTag is the tag of an image reference ("" for a digest-only, untagged or unparseable
// reference), as github.com/distribution/reference reads it.
func imageTag(ref string) string {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return ""
	}
	if t, ok := named.(reference.Tagged); ok {
		return t.Tag()
	}
	return ""
}

func expiringReason(ec *stewardv1.EtcdCluster) string {
	if c := meta.FindStatusCondition(ec.Status.Conditions, ConditionCertificatesExpiring); c != nil {
		return c.Reason
	}
	return ""
}

func wasDeadlineExceeded(ec *stewardv1.EtcdCluster) bool {
	c := meta.FindStatusCondition(ec.Status.Conditions, "Progressing")
	return c != nil && c.Reason == "ProgressDeadlineExceeded"
}

// syncMemberStatus mirrors each member's role, health and version onto its EtcdMember, so
// `kubectl get etcdmembers` tells the same story as the cluster's status, and records the version
// its data was last written by, which must outlive its Pod (plan: dataversion.go). Only changed
// members are written.
func (r *EtcdClusterReconciler) syncMemberStatus(ctx context.Context, o *observed, d plan.Decision) error {
	for _, ms := range d.Members {
		m := o.members[ms.Name]
		if m == nil {
			continue
		}
		data := d.DataVersions[ms.Name]
		if m.Status.Role == ms.Role && m.Status.Ready == ms.Ready && m.Status.Version == ms.Version &&
			equality.Semantic.DeepEqual(m.Status.DataVersion, data) {
			continue
		}
		base := m.DeepCopy()
		m.Status.Role, m.Status.Ready, m.Status.Version = ms.Role, ms.Ready, ms.Version
		m.Status.DataVersion = data.DeepCopy()
		if err := r.Client.Status().Patch(ctx, m, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// writeStatus patches status only when it changed: an idle cluster costs no writes. Changed means
// the patch is not empty: a time that differs below a second (kept in whole seconds) or any other
// difference the JSON does not carry is no change, and sending it cost a request per reconcile.
// An intent (locked) is written only onto the object it was decided from: the patch carries that
// resourceVersion, and the API server refuses it with a Conflict when the object has changed since.
func (r *EtcdClusterReconciler) writeStatus(ctx context.Context, base, ec *stewardv1.EtcdCluster, locked bool) error {
	if equality.Semantic.DeepEqual(base.Status, ec.Status) {
		return nil
	}
	data, err := client.MergeFrom(base).Data(ec)
	if err != nil {
		return err
	}
	if string(data) == "{}" {
		return nil
	}
	if locked {
		if data, err = withResourceVersion(data, ec.ResourceVersion); err != nil {
			return err
		}
	}
	// The patch computed once: sent as is rather than computed again by the client.
	if err := r.Client.Status().Patch(ctx, ec, client.RawPatch(types.MergePatchType, data)); err != nil {
		return client.IgnoreNotFound(err)
	}
	r.fresh.wrote(base, ec, time.Now())
	return nil
}

// withResourceVersion adds metadata.resourceVersion to a merge patch: the optimistic lock.
func withResourceVersion(data []byte, rv string) ([]byte, error) {
	var patch map[string]any
	if err := json.Unmarshal(data, &patch); err != nil {
		return nil, err
	}
	md, _ := patch["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
	}
	md["resourceVersion"] = rv
	patch["metadata"] = md
	return json.Marshal(patch)
}

// digest is a short label for the observed template, for humans comparing status at a glance.
func digest(t *stewardv1.MemberTemplate) string {
	if t == nil {
		return ""
	}
	b, err := json.Marshal(t)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:10]
}
