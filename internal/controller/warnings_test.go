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

// TestAuthWentOn walks status.auth's phase through reconciles (each "before" is the last one's
// "after") and says where the AuthWithoutCompaction warning is due. A phase of Unknown (etcd's auth
// not readable for a reconcile: the member list failing, a new operator's first read) hides nothing:
// the warning compares with the last phase known, remembered across it, and the restart starts
// from status as written.
func TestAuthWentOn(t *testing.T) {
	for _, tc := range []struct {
		name   string
		phases []string // "restart" drops what the operator remembers
		want   []int    // the steps (index into phases) that warn
	}{
		{"declared on a new cluster", []string{"", "On"}, []int{1}},
		{"enabled", []string{"Off", "Enabling", "Enabling", "On", "On"}, []int{3}},
		{"enabled, a user still syncing", []string{"Enabling", "Syncing", "On"}, []int{1}},
		{"a user synced with auth on: no second warning", []string{"On", "Syncing", "On"}, nil},
		{"turned off", []string{"On", "Disabling", "Off"}, nil},
		{"undeclared stays undeclared", []string{"Undeclared", "Undeclared"}, nil},
		{"undeclared, then declared", []string{"Undeclared", "On"}, []int{1}},
		{"etcd unreadable with auth on: no second warning", []string{"On", "Unknown", "Unknown", "On"}, nil},
		{"etcd unreadable as auth went on", []string{"Enabling", "Unknown", "On"}, []int{2}},
		{"etcd unreadable as auth went on, twice", []string{"Enabling", "Unknown", "Syncing", "Unknown", "On"}, []int{2}},
		{"a new operator whose first read failed, auth then on", []string{"Enabling", "restart", "Enabling", "Unknown", "On"}, []int{4}},
		{"a new operator that finds auth on", []string{"On", "restart", "On", "Unknown", "On"}, nil},
		{"a new operator that never knew the phase", []string{"restart", "Unknown", "On"}, nil},
	} {
		var m authPhaseMemory
		var warned []int
		var before *stewardv1.EtcdClusterStatus
		for i, p := range tc.phases {
			if p == "restart" {
				m = authPhaseMemory{}
				continue
			}
			after := st(nil)
			if p != "" {
				after = withAuth(after, p)
			}
			if before != nil && m.wentOn("uid", before, after) {
				warned = append(warned, i)
			}
			before = after
		}
		if fmt.Sprint(warned) != fmt.Sprint(tc.want) {
			t.Errorf("%s %v: warned at %v, want %v", tc.name, tc.phases, warned, tc.want)
		}
	}
}

func TestAuthPhaseMemoryForgets(t *testing.T) {
	var m authPhaseMemory
	m.wentOn("a", withAuth(st(nil), "Enabling"), withAuth(st(nil), "Unknown"))
	m.forget("a")
	if m.wentOn("a", withAuth(st(nil), "Unknown"), withAuth(st(nil), "On")) {
		t.Error("a forgotten cluster warned from a phase it no longer remembers")
	}
}
