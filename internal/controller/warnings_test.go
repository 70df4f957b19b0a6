package controller

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func st(alarms []string, conds ...metav1.Condition) *stewardv1.EtcdClusterStatus {
	return &stewardv1.EtcdClusterStatus{Conditions: conds,
		Members: []stewardv1.MemberStatus{{Name: "db-0", Alarms: alarms}}}
}

func c(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: "why"}
}

func TestWarnings(t *testing.T) {
	healthy := st(nil, c("Available", "True", "QuorumHealthy"), c("Degraded", "False", "AllHealthy"))
	for _, tc := range []struct {
		name          string
		before, after *stewardv1.EtcdClusterStatus
		want          string
	}{
		{"steady: nothing", healthy, healthy, "[]"},
		{"quorum lost", healthy, st(nil, c("Available", "False", "QuorumLost")), "[{QuorumLost  why}]"},
		{"quorum still lost: once only", st(nil, c("Available", "False", "QuorumLost")), st(nil, c("Available", "False", "QuorumLost")), "[]"},
		{"not formed yet is no page", st(nil), st(nil, c("Available", "False", "Bootstrapping")), "[]"},
		{"degraded, then for another reason", st(nil, c("Degraded", "True", "MemberNotReady")),
			st(nil, c("Degraded", "True", "MemberCrashLooping")), "[{Degraded  MemberCrashLooping: why}]"},
		{"a member restarting in a roll: no page", healthy, st(nil, c("Degraded", "True", "MemberPodMissing")), "[]"},
		{"deadline: its own event already", healthy, st(nil, c("Progressing", "False", "ProgressDeadlineExceeded")), "[]"},
		{"backups stale", healthy, st(nil, c("BackupReady", "False", "Stale")), "[{BackupNotReady  Stale: why}]"},
		{"an alarm appears, once", st(nil), st([]string{"NOSPACE"}), "[{Alarm db-0 NOSPACE raised on db-0}]"},
		{"the alarm stays", st([]string{"NOSPACE"}), st([]string{"NOSPACE"}), "[]"},
		{"auth found on without spec.auth, once", st(nil), undeclared(st(nil)), "[{AuthUndeclared  auth on}]"},
		{"auth still on without spec.auth", undeclared(st(nil)), undeclared(st(nil)), "[]"},
		{"auth declared and on: no page", st(nil), withAuth(st(nil), "On"), "[]"},
	} {
		if got := fmt.Sprint(warnings(tc.before, tc.after)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func withAuth(s *stewardv1.EtcdClusterStatus, phase string) *stewardv1.EtcdClusterStatus {
	s.Auth = &stewardv1.AuthStatus{Phase: stewardv1.AuthPhase(phase), Message: "auth on"}
	return s
}

func undeclared(s *stewardv1.EtcdClusterStatus) *stewardv1.EtcdClusterStatus {
	return withAuth(s, "Undeclared")
}

func TestAuthWentOn(t *testing.T) {
	for _, tc := range []struct {
		before, after string
		want          bool
	}{
		{"", "On", true},
		{"Enabling", "On", true},
		{"Enabling", "Syncing", true},
		{"Off", "On", true},
		{"Syncing", "On", false}, // a user synced with auth on: no second page
		{"On", "On", false},
		{"On", "Syncing", false},
		{"On", "Disabling", false},
		{"Undeclared", "Undeclared", false},
		{"Unknown", "On", false}, // etcd unreadable for a moment
		{"Undeclared", "On", true},
	} {
		before, after := st(nil), st(nil)
		if tc.before != "" {
			before = withAuth(before, tc.before)
		}
		after = withAuth(after, tc.after)
		if got := authWentOn(before, after); got != tc.want {
			t.Errorf("%s to %s: %v, want %v", tc.before, tc.after, got, tc.want)
		}
	}
}
