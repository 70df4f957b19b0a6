package metrics

import (
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// Recorder exports each cluster's last reconciled status and counts what the operator did.
type Recorder struct {
	mu       sync.Mutex
	clusters map[key]snapshot
	now      func() time.Time

	descs        map[string]*prometheus.Desc
	leaderChange *prometheus.CounterVec
	actions      *prometheus.CounterVec
	disruptions  *prometheus.CounterVec
	gate         *prometheus.CounterVec
	// API counts the operator's Kubernetes API requests; the manager wraps its client's transport with it.
	API *APICounter
}

type key struct{ namespace, name string }

type snapshot struct {
	status stewardv1.EtcdClusterStatus
	leader string
}

// New returns a Recorder registered with reg.
func New(reg prometheus.Registerer) (*Recorder, error) {
	r := &Recorder{clusters: map[key]snapshot{}, now: time.Now, descs: map[string]*prometheus.Desc{}}
	counter := func(d Def) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: d.Name, Help: d.Help}, d.Labels)
	}
	r.leaderChange, r.actions, r.disruptions, r.gate = counter(LeaderChanges), counter(Actions), counter(Disruptions), counter(GateFailures)
	r.API = &APICounter{vec: counter(APIRequests)}
	for _, d := range Catalog {
		if d.Kind == Gauge {
			r.descs[d.Name] = prometheus.NewDesc(d.Name, d.Help, d.Labels, nil)
		}
	}
	for _, c := range []prometheus.Collector{r, r.leaderChange, r.actions, r.disruptions, r.gate, r.API.vec} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Observe records a cluster's status after a reconcile.
func (r *Recorder) Observe(namespace, name string, s *stewardv1.EtcdClusterStatus) {
	if r == nil {
		return
	}
	leader := ""
	for _, m := range s.Members {
		if m.Role == stewardv1.RoleLeader {
			leader = m.Name
		}
	}
	k := key{namespace, name}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.clusters[k]; ok && leader != "" && old.leader != "" && old.leader != leader {
		r.leaderChange.WithLabelValues(namespace, name).Inc()
	}
	if leader == "" {
		leader = r.clusters[k].leader // an unknown leader is no change
	}
	r.clusters[k] = snapshot{status: *s.DeepCopy(), leader: leader}
}

// Forget drops a deleted cluster's series.
func (r *Recorder) Forget(namespace, name string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.clusters, key{namespace, name})
	for _, v := range []*prometheus.CounterVec{r.leaderChange, r.actions, r.disruptions, r.gate} {
		v.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "cluster": name})
	}
}

// Action counts an applied step; disruption kind and reason when it went through the chokepoint.
func (r *Recorder) Action(namespace, name, action, disruptionKind, reason string) {
	if r == nil {
		return
	}
	r.actions.WithLabelValues(namespace, name, action).Inc()
	if disruptionKind != "" {
		r.disruptions.WithLabelValues(namespace, name, disruptionKind, reason).Inc()
	}
}

// GateHeld counts a reconcile the recovery gate held, by the failed check.
func (r *Recorder) GateHeld(namespace, name, check string) {
	if r == nil || check == "" {
		return
	}
	r.gate.WithLabelValues(namespace, name, check).Inc()
}

// Describe implements prometheus.Collector for the gauges.
func (r *Recorder) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range r.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the gauges from each cluster's last status.
func (r *Recorder) Collect(ch chan<- prometheus.Metric) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	for k, snap := range r.clusters {
		s := snap.status
		emit := func(d Def, v float64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(r.descs[d.Name], prometheus.GaugeValue, v, append([]string{k.namespace, k.name}, extra...)...)
		}
		counts := map[[2]string]int{}
		for _, m := range s.Members {
			role := string(m.Role)
			if role == "" {
				role = string(stewardv1.RoleUnknown)
			}
			counts[[2]string{strings.ToLower(role), boolString(m.Ready)}]++
			if m.Role == stewardv1.RoleLeader {
				emit(Leader, 1, m.Name)
			}
			if m.DBSize != nil {
				emit(DBSize, float64(m.DBSize.Value()), m.Name)
			}
			if m.DBSizeInUse != nil {
				emit(DBSizeInUse, float64(m.DBSizeInUse.Value()), m.Name)
			}
			if m.DBSize != nil && m.Quota != nil && m.Quota.Value() > 0 {
				emit(QuotaUsed, float64(m.DBSize.Value())/float64(m.Quota.Value()), m.Name)
			}
			for _, a := range m.Alarms {
				emit(Alarm, 1, m.Name, a)
			}
		}
		for rc, n := range counts {
			emit(Members, float64(n), rc[0], rc[1])
		}
		emit(QuorumHealthy, boolFloat(meta.IsStatusConditionTrue(s.Conditions, "Available")))
		avail := meta.FindStatusCondition(s.Conditions, "Available")
		emit(Unreachable, boolFloat(avail != nil && avail.Reason == "MembersUnreachable"))
		pending := 0
		if ro := s.Rollout; ro != nil {
			pending = len(ro.Pending)
			if ro.Member != "" {
				pending++
			}
		}
		emit(RolloutPending, float64(pending))
		if st := s.LastStep; st != nil {
			emit(StepSeconds, now.Sub(st.Since.Time).Seconds(), st.Action)
		}
		if t := s.TLS; t != nil {
			if t.CANotAfter != nil {
				emit(CAExpiry, float64(t.CANotAfter.Unix()))
			}
			for _, c := range t.Certificates {
				emit(CertificateExpiry, float64(c.NotAfter.Unix()), c.Name)
			}
		}
		if c := meta.FindStatusCondition(s.Conditions, "PlacementAtRisk"); c != nil {
			emit(PlacementAtRisk, boolFloat(c.Status == metav1.ConditionTrue))
		}
		if c := meta.FindStatusCondition(s.Conditions, "BackupReady"); c != nil {
			emit(BackupReady, boolFloat(c.Status == metav1.ConditionTrue))
		}
		if b := s.Backup; b != nil && b.LastSuccessfulBackup != nil {
			// The newest success, as the metric always said: lastSuccessfulBackup prefers an
			// older verified backup over a newer one whose drill has not passed.
			last := b.LastSuccessfulBackup
			if b.NewerUnverified != nil {
				last = b.NewerUnverified
			}
			if last.Time != nil {
				emit(BackupLastSuccess, float64(last.Time.Unix()))
			}
			emit(BackupLastRevision, float64(last.Revision))
		}
		if c := s.Backup; c != nil && c.Continuous != nil {
			if t := c.Continuous.DurableTime; t != nil {
				emit(ContinuousDurable, float64(t.Unix()))
			}
			if t := c.Continuous.ReportedAt; t != nil {
				emit(ContinuousReported, float64(t.Unix()))
			}
			emit(ContinuousLag, float64(c.Continuous.LagRevisions))
		}
	}
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
