// Package metrics holds Steward's own Prometheus metrics: one catalog (names, help, labels) that
// both registers them and generates docs/metrics.md, so the page cannot drift from the code.
// Cluster state is exported from each reconcile's status at scrape time (a collector keeps the last
// snapshot per cluster); events (disruptions, gate failures, actions) are counters.
package metrics

import (
	"fmt"
	"io"
	"strings"
)

// Kind is a metric's Prometheus type.
type Kind string

const (
	Gauge   Kind = "gauge"
	Counter Kind = "counter"
)

// Def describes one metric.
type Def struct {
	Name   string
	Kind   Kind
	Help   string
	Labels []string
}

// base labels of every per-cluster metric.
var clusterLabels = []string{"namespace", "cluster"}

func withLabels(extra ...string) []string {
	return append(append([]string{}, clusterLabels...), extra...)
}

// The catalog. Cardinality is bounded by clusters × members (× alarm types, certificates): no label
// takes a per-request value.
var (
	Members            = Def{"steward_cluster_members", Gauge, "Members by role (leader, follower, learner, unknown) and readiness.", withLabels("role", "ready")}
	QuorumHealthy      = Def{"steward_cluster_quorum_healthy", Gauge, "1 while a quorum of voters is healthy (condition Available).", withLabels()}
	Unreachable        = Def{"steward_cluster_members_unreachable", Gauge, "1 while the operator cannot reach members it needs to judge quorum (condition Available, reason MembersUnreachable): no recovery runs on that.", withLabels()}
	Leader             = Def{"steward_cluster_leader", Gauge, "1 for the member that leads, as status reports it.", withLabels("member")}
	LeaderChanges      = Def{"steward_cluster_leader_changes_total", Counter, "Leader changes the operator observed between reconciles.", withLabels()}
	PlacementAtRisk    = Def{"steward_cluster_placement_at_risk", Gauge, "1 while condition PlacementAtRisk is True: two voters share a node, or one zone holds a majority of them.", withLabels()}
	RolloutPending     = Def{"steward_rollout_pending_members", Gauge, "Outdated members still to roll (status.rollout.pending plus the one rolling).", withLabels()}
	StepSeconds        = Def{"steward_rollout_step_seconds", Gauge, "Seconds the current step (status.lastStep) has been under way.", withLabels("action")}
	Actions            = Def{"steward_actions_total", Counter, "Steps the operator applied, by action.", withLabels("action")}
	Disruptions        = Def{"steward_disruptions_total", Counter, "Disruptions taken through the chokepoint, by kind and reason.", withLabels("kind", "reason")}
	GateFailures       = Def{"steward_recovery_gate_failures_total", Counter, "Reconciles the recovery gate held, by the check that failed.", withLabels("check")}
	DBSize             = Def{"steward_member_db_size_bytes", Gauge, "The member's backend size.", withLabels("member")}
	DBSizeInUse        = Def{"steward_member_db_size_in_use_bytes", Gauge, "The part of the backend holding live data.", withLabels("member")}
	QuotaUsed          = Def{"steward_member_quota_used_ratio", Gauge, "Backend size over the quota (0 to 1; NOSPACE at 1).", withLabels("member")}
	Alarm              = Def{"steward_member_alarm", Gauge, "1 for each active alarm (NOSPACE, CORRUPT) on a member.", withLabels("member", "alarm")}
	CertificateExpiry  = Def{"steward_certificate_expiry_timestamp_seconds", Gauge, "notAfter of each certificate Steward issued (status.tls.certificates).", withLabels("certificate")}
	CAExpiry           = Def{"steward_ca_expiry_timestamp_seconds", Gauge, "notAfter of the cluster's CA.", withLabels()}
	BackupLastSuccess  = Def{"steward_backup_last_success_timestamp_seconds", Gauge, "When the newest successful backup of the cluster completed.", withLabels()}
	BackupLastRevision = Def{"steward_backup_last_success_revision", Gauge, "The etcd revision of the newest successful backup.", withLabels()}
	ContinuousDurable  = Def{"steward_continuous_backup_durable_timestamp_seconds", Gauge, "The stamp of the newest revision the continuous backup stored (status.backup.continuous.durableTime).", withLabels()}
	ContinuousLag      = Def{"steward_continuous_backup_lag_revisions", Gauge, "Revisions the watched member has that the continuous backup has not stored yet: what a loss now would cost.", withLabels()}
	ContinuousReported = Def{"steward_continuous_backup_report_timestamp_seconds", Gauge, "When the continuous backup's streamer was last heard from.", withLabels()}
	BackupReady        = Def{"steward_backup_ready", Gauge, "Condition BackupReady (a schedule targets the cluster): 0 when the newest successful backup is older than twice the schedule's interval or the last one failed.", withLabels()}
)

// Catalog is every metric, in the order docs/metrics.md lists them.
var Catalog = []Def{Members, QuorumHealthy, Unreachable, Leader, LeaderChanges, PlacementAtRisk, RolloutPending, StepSeconds, Actions, Disruptions,
	GateFailures, DBSize, DBSizeInUse, QuotaUsed, Alarm, CertificateExpiry, CAExpiry, BackupLastSuccess, BackupLastRevision, BackupReady,
	ContinuousDurable, ContinuousLag, ContinuousReported, APIRequests}

// WriteDoc writes docs/metrics.md from the catalog.
func WriteDoc(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# Metrics\n\n")
	b.WriteString("Generated from `internal/metrics` (`go run ./hack/metricsdoc > docs/metrics.md`; a test fails when\n")
	b.WriteString("this page and the code differ). Steward serves them on its metrics endpoint next to\n")
	b.WriteString("controller-runtime's own, among them `controller_runtime_reconcile_time_seconds` and\n")
	b.WriteString("`controller_runtime_reconcile_errors_total` (label `controller=\"etcdcluster\"`) for reconcile\n")
	b.WriteString("durations and errors. Every per-cluster metric carries `namespace` and `cluster`; a\n")
	b.WriteString("cluster's series go when it is deleted.\n\n")
	b.WriteString("The endpoint (Service `steward-controller-manager-metrics`, port 8443) serves HTTPS to callers whose\n")
	b.WriteString("token may get `/metrics` (bind ClusterRole `steward-metrics-reader`); `--metrics-secure=false` serves\n")
	b.WriteString("plain HTTP. The optional kustomize component `config/prometheus` adds a ServiceMonitor for it, a\n")
	b.WriteString("PodMonitor for every member's own etcd metrics (its plain-HTTP metrics listener, port `metrics`,\n")
	b.WriteString("2381: no client certificate, no key data), the scraper's binding, the alerts\n")
	b.WriteString("(`prometheusrule.yaml`, runbooks in docs/runbooks.md) and a Grafana dashboard (`dashboard.json`, as a\n")
	b.WriteString("ConfigMap labelled `grafana_dashboard`). A unit test checks that every series the alerts and the\n")
	b.WriteString("dashboard query is in this catalog or in a real etcd member's `/metrics`. Without Prometheus,\n")
	b.WriteString("`kubectl describe etcd` shows a Warning Event when quorum is lost, `Degraded` turns True for a lasting\n")
	b.WriteString("reason, the progress deadline passes, backups go stale, or an alarm is raised.\n\n")
	b.WriteString("To see it working, `make sandbox PROMETHEUS=1` also runs a Prometheus on the host (built from the module\n")
	b.WriteString("proxy) at http://127.0.0.1:9090, configured from the shipped ServiceMonitor, PodMonitor and rules as the\n")
	b.WriteString("Prometheus Operator would (`internal/promconfig`; its token is ServiceAccount `monitoring/prometheus-k8s`'s,\n")
	b.WriteString("which `metrics_reader_binding.yaml` binds): `/api/v1/targets`, `/api/v1/alerts` and `/api/v1/query` answer\n")
	b.WriteString("there (the built-in web UI is left out of the build). The e2e `TestPrometheus` runs the same against a\n")
	b.WriteString("live cluster: every dashboard panel's query returns series, and a member down (`StewardEtcdQuorumAtRisk`),\n")
	b.WriteString("a stuck roll (`StewardRolloutStuck`), NOSPACE (`StewardEtcdAlarm`) and a failed backup\n")
	b.WriteString("(`StewardBackupNotReady`) each fire and clear again (their `for` cut to 0s and the stuck roll's 600 s to\n")
	b.WriteString("15 s there). The ServiceMonitor sets `honorLabels: true`: Steward's series carry the EtcdCluster's\n")
	b.WriteString("`namespace`, which the target's (the operator's) would otherwise replace.\n\n")
	b.WriteString("| metric | type | labels | meaning |\n| --- | --- | --- | --- |\n")
	for _, d := range Catalog {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", d.Name, d.Kind, strings.Join(d.Labels, ", "), d.Help)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
