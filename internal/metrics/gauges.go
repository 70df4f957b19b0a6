package metrics

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// gauge is one sample of a cluster's gauges, less the namespace and cluster labels.
type gauge struct {
	def    *Def
	value  float64
	labels []string
}

// stepSince is the running step; its age is taken when Prometheus scrapes.
type stepSince struct {
	action string
	since  time.Time
}

// gaugesOf turns a status into the samples Collect emits. The Recorder keeps these, not the
// status: a status copy per cluster (conditions, observed template, certificates) is 2.6 times
// the size (TestObserveKeepsOnlyTheGauges) and is already in the informer cache.
func gaugesOf(s *stewardv1.EtcdClusterStatus) ([]gauge, *stepSince) {
	var out []gauge
	add := func(d *Def, v float64, extra ...string) {
		out = append(out, gauge{def: d, value: v, labels: extra})
	}
	type roleReady struct{ role, ready string }
	counts := map[roleReady]int{} // Prometheus sorts what Collect emits: map order does not show
	for _, m := range s.Members {
		role := string(m.Role)
		if role == "" {
			role = string(stewardv1.RoleUnknown)
		}
		rr := roleReady{strings.ToLower(role), boolString(m.Ready)}
		counts[rr]++
		if m.Role == stewardv1.RoleLeader {
			add(&Leader, 1, m.Name)
		}
		if m.DBSize != nil {
			add(&DBSize, float64(m.DBSize.Value()), m.Name)
		}
		if m.DBSizeInUse != nil {
			add(&DBSizeInUse, float64(m.DBSizeInUse.Value()), m.Name)
		}
		if m.DBSize != nil && m.Quota != nil && m.Quota.Value() > 0 {
			add(&QuotaUsed, float64(m.DBSize.Value())/float64(m.Quota.Value()), m.Name)
		}
		for _, a := range m.Alarms {
			add(&Alarm, 1, m.Name, a)
		}
	}
	for rr, n := range counts {
		add(&Members, float64(n), rr.role, rr.ready)
	}
	add(&QuorumHealthy, boolFloat(meta.IsStatusConditionTrue(s.Conditions, "Available")))
	avail := meta.FindStatusCondition(s.Conditions, "Available")
	add(&Unreachable, boolFloat(avail != nil && avail.Reason == "MembersUnreachable"))
	pending := 0
	if ro := s.Rollout; ro != nil {
		pending = len(ro.Pending)
		if ro.Member != "" {
			pending++
		}
	}
	add(&RolloutPending, float64(pending))
	if t := s.TLS; t != nil {
		if t.CANotAfter != nil {
			add(&CAExpiry, float64(t.CANotAfter.Unix()))
		}
		for _, c := range t.Certificates {
			add(&CertificateExpiry, float64(c.NotAfter.Unix()), c.Name)
		}
	}
	if c := meta.FindStatusCondition(s.Conditions, "PlacementAtRisk"); c != nil {
		add(&PlacementAtRisk, boolFloat(c.Status == metav1.ConditionTrue))
	}
	if c := meta.FindStatusCondition(s.Conditions, "BackupReady"); c != nil {
		add(&BackupReady, boolFloat(c.Status == metav1.ConditionTrue))
	}
	if b := s.Backup; b != nil && b.LastSuccessfulBackup != nil {
		// The newest success, as the metric always said: lastSuccessfulBackup prefers an
		// older verified backup over a newer one whose drill has not passed.
		last := b.LastSuccessfulBackup
		if b.NewerUnverified != nil {
			last = b.NewerUnverified
		}
		if last.Time != nil {
			add(&BackupLastSuccess, float64(last.Time.Unix()))
		}
		add(&BackupLastRevision, float64(last.Revision))
	}
	if c := s.Backup; c != nil && c.Continuous != nil {
		if t := c.Continuous.DurableTime; t != nil {
			add(&ContinuousDurable, float64(t.Unix()))
		}
		if t := c.Continuous.ReportedAt; t != nil {
			add(&ContinuousReported, float64(t.Unix()))
		}
		add(&ContinuousLag, float64(c.Continuous.LagRevisions))
	}
	var step *stepSince
	if st := s.LastStep; st != nil {
		step = &stepSince{action: st.Action, since: st.Since.Time}
	}
	// A slice grown by append keeps its spare capacity; the Recorder holds this for every cluster.
	return out[:len(out):len(out)], step
}
