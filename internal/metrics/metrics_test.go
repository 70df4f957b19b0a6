package metrics

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// docs/metrics.md is generated from the catalog; regenerate with `go run ./hack/metricsdoc`.
func TestDocMatchesCatalog(t *testing.T) {
	want, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	if err := WriteDoc(&got); err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Errorf("docs/metrics.md differs from the catalog: run `go run ./hack/metricsdoc > docs/metrics.md`")
	}
}

func status(leader string) *stewardv1.EtcdClusterStatus {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	return &stewardv1.EtcdClusterStatus{
		Members: []stewardv1.MemberStatus{
			{Name: "db-0", Role: roleOf("db-0", leader), Ready: true, DBSize: q("100Mi"), DBSizeInUse: q("40Mi"), Quota: q("200Mi"), Alarms: []string{"NOSPACE"}},
			{Name: "db-1", Role: roleOf("db-1", leader), Ready: true},
			{Name: "db-2", Role: stewardv1.RoleLearner},
		},
		Conditions: []metav1.Condition{{Type: "Available", Status: metav1.ConditionTrue},
			{Type: "PlacementAtRisk", Status: metav1.ConditionTrue, Reason: "MembersShareNode"}},
		Rollout: &stewardv1.RolloutStatus{Member: "db-1", Pending: []string{"db-0"}},
		TLS:     &stewardv1.TLSStatus{CANotAfter: ptr.To(metav1.NewTime(time.Unix(2000000000, 0)))},
		Backup: &stewardv1.BackupSummary{LastSuccessfulBackup: &stewardv1.BackupRef{Name: "b", Revision: 42,
			Time: ptr.To(metav1.NewTime(time.Unix(1800000000, 0)))},
			Continuous: &stewardv1.ContinuousSummary{Schedule: "s", DurableRevision: 90, LagRevisions: 3,
				DurableTime: ptr.To(metav1.NewTime(time.Unix(1800000100, 0))), ReportedAt: ptr.To(metav1.NewTime(time.Unix(1800000105, 0)))}},
	}
}

func roleOf(name, leader string) stewardv1.MemberRole {
	if name == leader {
		return stewardv1.RoleLeader
	}
	return stewardv1.RoleFollower
}

func TestRecorder(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	r.Observe("ns", "db", status("db-0"))
	r.Observe("ns", "db", status("db-1")) // a leader change
	r.Action("ns", "db", "DeletePod", "Restart", "RollingMember")
	r.Action("ns", "db", "AdoptSpec", "", "SpecChanged")
	r.GateHeld("ns", "db", "AppliedIndex")
	expected := `
# HELP steward_cluster_members Members by role (leader, follower, learner, unknown) and readiness.
# TYPE steward_cluster_members gauge
steward_cluster_members{cluster="db",namespace="ns",ready="false",role="learner"} 1
steward_cluster_members{cluster="db",namespace="ns",ready="true",role="follower"} 1
steward_cluster_members{cluster="db",namespace="ns",ready="true",role="leader"} 1
# HELP steward_cluster_leader 1 for the member that leads, as status reports it.
# TYPE steward_cluster_leader gauge
steward_cluster_leader{cluster="db",member="db-1",namespace="ns"} 1
# HELP steward_cluster_leader_changes_total Leader changes the operator observed between reconciles.
# TYPE steward_cluster_leader_changes_total counter
steward_cluster_leader_changes_total{cluster="db",namespace="ns"} 1
# HELP steward_member_alarm 1 for each active alarm (NOSPACE, CORRUPT) on a member.
# TYPE steward_member_alarm gauge
steward_member_alarm{alarm="NOSPACE",cluster="db",member="db-0",namespace="ns"} 1
# HELP steward_member_quota_used_ratio Backend size over the quota (0 to 1; NOSPACE at 1).
# TYPE steward_member_quota_used_ratio gauge
steward_member_quota_used_ratio{cluster="db",member="db-0",namespace="ns"} 0.5
# HELP steward_cluster_placement_at_risk 1 while condition PlacementAtRisk is True: two voters share a node, or one zone holds a majority of them.
# TYPE steward_cluster_placement_at_risk gauge
steward_cluster_placement_at_risk{cluster="db",namespace="ns"} 1
# HELP steward_rollout_pending_members Outdated members still to roll (status.rollout.pending plus the one rolling).
# TYPE steward_rollout_pending_members gauge
steward_rollout_pending_members{cluster="db",namespace="ns"} 2
# HELP steward_disruptions_total Disruptions taken through the chokepoint, by kind and reason.
# TYPE steward_disruptions_total counter
steward_disruptions_total{cluster="db",kind="Restart",namespace="ns",reason="RollingMember"} 1
# HELP steward_recovery_gate_failures_total Reconciles the recovery gate held, by the check that failed.
# TYPE steward_recovery_gate_failures_total counter
steward_recovery_gate_failures_total{check="AppliedIndex",cluster="db",namespace="ns"} 1
# HELP steward_backup_last_success_revision The etcd revision of the newest successful backup.
# TYPE steward_backup_last_success_revision gauge
steward_backup_last_success_revision{cluster="db",namespace="ns"} 42
# HELP steward_ca_expiry_timestamp_seconds notAfter of the cluster's CA.
# TYPE steward_ca_expiry_timestamp_seconds gauge
steward_ca_expiry_timestamp_seconds{cluster="db",namespace="ns"} 2e+09
`
	names := []string{Members.Name, Leader.Name, LeaderChanges.Name, Alarm.Name, QuotaUsed.Name, PlacementAtRisk.Name, RolloutPending.Name,
		Disruptions.Name, GateFailures.Name, BackupLastRevision.Name, CAExpiry.Name}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), names...); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, Actions.Name); err != nil || n != 2 {
		t.Errorf("%d action series (%v), want 2", n, err)
	}
	// A deleted cluster leaves no series behind.
	r.Forget("ns", "db")
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Errorf("%d series after Forget (%v), want 0", n, err)
	}
}

// Every catalog entry is registered and named with the steward_ prefix.
func TestCatalogRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	r.Observe("ns", "db", status("db-0"))
	r.Action("ns", "db", "DeletePod", "Restart", "RollingMember")
	r.GateHeld("ns", "db", "AppliedIndex")
	r.Observe("ns", "db", status("db-1"))
	r.API.vec.WithLabelValues("get", "pods").Inc()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		seen[mf.GetName()] = true
	}
	for _, d := range Catalog {
		if !strings.HasPrefix(d.Name, "steward_") {
			t.Errorf("%s lacks the steward_ prefix", d.Name)
		}
		if !seen[d.Name] && d.Name != StepSeconds.Name && d.Name != CertificateExpiry.Name && d.Name != BackupReady.Name {
			t.Errorf("%s is not exported", d.Name)
		}
	}
}

// Series grow with clusters and members only: a cluster of n members with two alarms each exports a
// bounded number of series, whatever happened in it, and no label takes a per-request value.
func TestCardinalityBound(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	const n = 7
	s := &stewardv1.EtcdClusterStatus{Conditions: []metav1.Condition{{Type: "Available", Status: metav1.ConditionTrue}}}
	for i := range n {
		s.Members = append(s.Members, stewardv1.MemberStatus{Name: "m" + string(rune('0'+i)), Role: stewardv1.RoleFollower,
			Ready: i%2 == 0, DBSize: q("1Gi"), DBSizeInUse: q("1Mi"), Quota: q("2Gi"), Alarms: []string{"NOSPACE", "CORRUPT"}})
	}
	s.Members[0].Role = stewardv1.RoleLeader
	for i := range 1000 { // many reconciles, actions and holds
		r.Observe("ns", "db", s)
		r.Action("ns", "db", "DeletePod", "Restart", "RollingMember")
		r.GateHeld("ns", "db", []string{"AppliedIndex", "Leader"}[i%2])
	}
	got, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	// Per member: size, in use, quota ratio, 2 alarms; per cluster: members by (role, ready) ≤ 4
	// here, quorum, leader, pending; the three counters: one series each here, two gate checks.
	if limit := n*5 + 4 + 3 + 1 + 1 + 2; got > limit {
		t.Errorf("%d series for one cluster of %d members, want at most %d", got, n, limit)
	}
}

// TestBackupMetricsNameTheNewest: lastSuccessfulBackup may prefer an older verified backup; the
// metrics still report the newest success, as they are documented to.
func TestBackupMetricsNameTheNewest(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	st := status("db-0")
	st.Backup.LastSuccessfulBackup.Verified = true
	st.Backup.NewerUnverified = &stewardv1.BackupRef{Name: "c", Revision: 57, Time: ptr.To(metav1.NewTime(time.Unix(1800003600, 0)))}
	r.Observe("ns", "db", st)
	expected := `
# HELP steward_backup_last_success_revision The etcd revision of the newest successful backup.
# TYPE steward_backup_last_success_revision gauge
steward_backup_last_success_revision{cluster="db",namespace="ns"} 57
# HELP steward_backup_last_success_timestamp_seconds When the newest successful backup of the cluster completed.
# TYPE steward_backup_last_success_timestamp_seconds gauge
steward_backup_last_success_timestamp_seconds{cluster="db",namespace="ns"} 1.8000036e+09
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), BackupLastRevision.Name, BackupLastSuccess.Name); err != nil {
		t.Error(err)
	}
}

// The continuous backup's figures come from status.backup.continuous.
func TestContinuousBackupMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	r.Observe("ns", "db", status("db-0"))
	expected := `
# HELP steward_continuous_backup_durable_timestamp_seconds The stamp of the newest revision the continuous backup stored (status.backup.continuous.durableTime).
# TYPE steward_continuous_backup_durable_timestamp_seconds gauge
steward_continuous_backup_durable_timestamp_seconds{cluster="db",namespace="ns"} 1.8000001e+09
# HELP steward_continuous_backup_lag_revisions Revisions the watched member has that the continuous backup has not stored yet: what a loss now would cost.
# TYPE steward_continuous_backup_lag_revisions gauge
steward_continuous_backup_lag_revisions{cluster="db",namespace="ns"} 3
# HELP steward_continuous_backup_report_timestamp_seconds When the continuous backup's streamer was last heard from.
# TYPE steward_continuous_backup_report_timestamp_seconds gauge
steward_continuous_backup_report_timestamp_seconds{cluster="db",namespace="ns"} 1.800000105e+09
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), ContinuousDurable.Name, ContinuousLag.Name, ContinuousReported.Name); err != nil {
		t.Error(err)
	}
}
