package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// Recorder exports gauges of each cluster's last reconciled status and counts what the operator did.
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

// snapshot is what a cluster's last reconciled status leaves for the gauges.
type snapshot struct {
	gauges []gauge
	step   *stepSince
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
	gauges, step := gaugesOf(s)
	r.clusters[k] = snapshot{gauges: gauges, step: step, leader: leader}
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
		emit := func(d Def, v float64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(r.descs[d.Name], prometheus.GaugeValue, v, append([]string{k.namespace, k.name}, extra...)...)
		}
		for _, g := range snap.gauges {
			emit(*g.def, g.value, g.labels...)
		}
		if snap.step != nil {
			emit(StepSeconds, now.Sub(snap.step.since).Seconds(), snap.step.action)
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
