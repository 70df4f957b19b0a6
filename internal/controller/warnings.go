package controller

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/authplan"
	"github.com/etcd-steward/steward/internal/backupplan"
	"github.com/etcd-steward/steward/internal/plan"
)

// warning is a Warning Event to record.
type warning struct{ reason, member, message string }

// warnings are the Warning Events a status change calls for: each condition an alert would page on
// (docs/runbooks.md), when it turns bad or changes its reason while bad, and each alarm that appears,
// so `kubectl describe` tells the story without Prometheus. Steady states emit nothing.
func warnings(before, after *stewardv1.EtcdClusterStatus) []warning {
	var out []warning
	turned := func(typ string, bad metav1.ConditionStatus) *metav1.Condition {
		now := meta.FindStatusCondition(after.Conditions, typ)
		if now == nil || now.Status != bad {
			return nil
		}
		old := meta.FindStatusCondition(before.Conditions, typ)
		if old != nil && old.Status == bad && old.Reason == now.Reason {
			return nil
		}
		return now
	}
	if c := turned(plan.ConditionAvailable, metav1.ConditionFalse); c != nil && c.Reason == string(plan.ReasonQuorumLost) {
		out = append(out, warning{"QuorumLost", "", c.Message})
	}
	// A member briefly missing or unready is every planned restart; those page only when they last
	// (the QuorumAtRisk alert), so they make no Event here.
	if c := turned(plan.ConditionDegraded, metav1.ConditionTrue); c != nil &&
		c.Reason != string(plan.ReasonMemberPodMissing) && c.Reason != string(plan.ReasonMemberUnhealthy) {
		out = append(out, warning{"Degraded", "", fmt.Sprintf("%s: %s", c.Reason, c.Message)})
	}
	// The progress deadline has its own Warning already (status.go).
	if c := turned(backupplan.ConditionBackupReady, metav1.ConditionFalse); c != nil {
		out = append(out, warning{"BackupNotReady", "", fmt.Sprintf("%s: %s", c.Reason, c.Message)})
	}
	if undeclaredAuth(after) && !undeclaredAuth(before) {
		out = append(out, warning{"AuthUndeclared", "", after.Auth.Message})
	}
	had := map[string]bool{}
	for _, m := range before.Members {
		for _, a := range m.Alarms {
			had[m.Name+"/"+a] = true
		}
	}
	for _, m := range after.Members {
		for _, a := range m.Alarms {
			if !had[m.Name+"/"+a] {
				out = append(out, warning{"Alarm", m.Name, fmt.Sprintf("%s raised on %s", a, m.Name)})
			}
		}
	}
	return out
}

// warn records the Warning Events of a status change.
func (r *EtcdClusterReconciler) warn(ec *stewardv1.EtcdCluster, before *stewardv1.EtcdClusterStatus) {
	ws := warnings(before, &ec.Status)
	if r.authPhases.wentOn(ec.UID, before, &ec.Status) && !autoCompacts(ec) {
		ws = append(ws, warning{"AuthWithoutCompaction", "", authplan.CompactionHint})
	}
	for _, w := range ws {
		r.memberEvent(ec, w.member, corev1.EventTypeWarning, w.reason, "%s", w.message)
	}
}

// undeclaredAuth: etcd has authentication on while spec.auth is not declared.
func undeclaredAuth(st *stewardv1.EtcdClusterStatus) bool {
	return st.Auth != nil && st.Auth.Phase == stewardv1.AuthPhase(authplan.Undeclared)
}

// authPhaseMemory remembers, per cluster UID, the last status.auth phase that was not Unknown.
// Unknown (etcd's auth state unread for a reconcile: the member list failing, a new operator's
// first read) says nothing about whether auth went on; compared with it, a switch seen as
// Enabling, Unknown, On made no warning at all (CI, stop 53: the operator killed mid-enable).
// Losing it on restart costs the warning only when the new operator's first status read is
// Unknown too.
type authPhaseMemory struct{ phases sync.Map }

// wentOn says whether etcd auth went on with this status write (On, or Syncing a user) and was not
// on at the last phase known. Steward's own identity compacts as root; every other user is
// refused, so without etcd's auto-compaction history grows until NOSPACE: said once when auth goes
// on, not after each user change nor after etcd was unreadable for a while.
func (m *authPhaseMemory) wentOn(uid types.UID, before, after *stewardv1.EtcdClusterStatus) bool {
	was := authPhase(before)
	if was == stewardv1.AuthPhase(authplan.Unknown) {
		if v, ok := m.phases.Load(uid); ok {
			was = v.(stewardv1.AuthPhase)
		}
	}
	if now := authPhase(after); now != stewardv1.AuthPhase(authplan.Unknown) {
		m.phases.Store(uid, now)
	} else if was != stewardv1.AuthPhase(authplan.Unknown) {
		m.phases.Store(uid, was)
	}
	return authOn(after) && !phaseOn(was) && was != stewardv1.AuthPhase(authplan.Unknown)
}

func (m *authPhaseMemory) forget(uid types.UID) { m.phases.Delete(uid) }

// authPhase is status.auth.phase, "" without status.auth.
func authPhase(st *stewardv1.EtcdClusterStatus) stewardv1.AuthPhase {
	if st.Auth == nil {
		return ""
	}
	return st.Auth.Phase
}

func authOn(st *stewardv1.EtcdClusterStatus) bool { return phaseOn(authPhase(st)) }

func phaseOn(p stewardv1.AuthPhase) bool {
	return p == stewardv1.AuthPhase(authplan.On) || p == stewardv1.AuthPhase(authplan.Syncing)
}
