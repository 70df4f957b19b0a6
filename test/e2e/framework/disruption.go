package framework

import (
	"context"
	"crypto/tls"
	"sort"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// MonitorConfig says what to watch: the member Pods (namespace + labels) and the
// names of the members that should exist (Pod name = member name).
type MonitorConfig struct {
	Namespace string
	Labels    map[string]string
	// Expected returns the member names that should be available right now. A
	// function, because scale tests change it while the monitor runs.
	Expected func() []string
	Interval time.Duration // default 100ms
	// TLS, when set, makes the member-list client dial the Pods over https with it. Pods are
	// dialled by IP, which no member certificate names: use a chain-only config
	// (ClientTLS.Config("")). nil means plaintext.
	TLS *tls.Config
}

// Monitor samples, every Interval, the Pods of a cluster and etcd's member list, and
// records how many expected members were unavailable at each instant (see Evaluate).
type Monitor struct {
	f      *Framework
	cfg    MonitorConfig
	client *clientv3.Client // endpoints follow the Ready Pods' IPs
	// pods holds the cluster's Pods from a watch: a sample reads them from memory. The monitor
	// as it was (Pods listed from the API server and the member list asked, each every 100 ms)
	// cost the suite's machine 0.10 of a core beside a settled 3-member cluster; the Pod list was
	// the API server's share of it. A watch also shows a change when it happens, not at the next
	// list.
	pods   cache.SharedIndexInformer
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	timeline Timeline
}

// StartMonitor begins sampling at once; Stop ends it and returns the timeline.
func (f *Framework) StartMonitor(cfg MonitorConfig) *Monitor {
	if cfg.Interval <= 0 {
		cfg.Interval = 100 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Monitor{f: f, cfg: cfg, cancel: cancel, done: make(chan struct{})}
	factory := informers.NewSharedInformerFactoryWithOptions(f.Clientset, 0, informers.WithNamespace(cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = labels.SelectorFromSet(cfg.Labels).String() }))
	m.pods = factory.Core().V1().Pods().Informer()
	factory.Start(ctx.Done())
	// The first sample is taken from a listed watch, as the first list was before (a sample
	// before it would be Unknown).
	syncCtx, cancelSync := context.WithTimeout(ctx, 30*time.Second)
	cache.WaitForCacheSync(syncCtx.Done(), m.pods.HasSynced)
	cancelSync()
	go m.run(ctx)
	return m
}

// errPodsNotSynced: the Pod watch has not listed yet; nothing can be said about the members.
const errPodsNotSynced = monitorError("the Pod watch has not listed the Pods yet")

// currentPods are the Pods the watch holds now.
func (m *Monitor) currentPods() ([]*corev1.Pod, error) {
	if !m.pods.HasSynced() {
		return nil, errPodsNotSynced
	}
	var out []*corev1.Pod
	for _, o := range m.pods.GetStore().List() {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (m *Monitor) run(ctx context.Context) {
	defer close(m.done)
	defer func() {
		if m.client != nil {
			_ = m.client.Close()
		}
	}()
	tick := time.NewTicker(m.cfg.Interval)
	defer tick.Stop()
	for {
		s := m.sample(ctx)
		if ctx.Err() != nil {
			return
		}
		m.mu.Lock()
		m.timeline = append(m.timeline, s)
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sample takes one observation. Both reads get a deadline below the interval's
// order of magnitude so one hung request cannot hide a whole disruption.
func (m *Monitor) sample(ctx context.Context) Sample {
	at := time.Now()
	pods, err := m.currentPods()
	if err != nil {
		// Without the Pod list nothing can be said about the members either way.
		return UnknownSample(at, err)
	}
	var obs []PodObservation
	var endpoints []string
	for _, p := range pods {
		ready := PodReady(p)
		obs = append(obs, PodObservation{Name: p.Name, Ready: ready})
		if ready && p.Status.PodIP != "" {
			endpoints = append(endpoints, PodClientURL(p, m.cfg.TLS != nil))
		}
	}
	members, listErr := m.memberList(ctx, endpoints)
	s := Evaluate(at, m.cfg.Expected(), obs, members, listErr)
	s.Done = time.Now()
	return s
}

// memberList asks any Ready member (linearizable in 3.5+, so it also fails without
// quorum). Tries of one, one, one, two and two seconds (the client rotates endpoints) absorb a
// request that hit a member just as it was killed, and slow answers on CI's loaded cores: half a
// second twice, and later three seconds of no answer at the end of a full suite on 2 cores (one
// member deleted by the test, the other two Ready), each counted a cluster with two members
// serving as having lost quorum. A quorum lost for longer than 7 s is still counted; one the
// operator causes by deleting or removing members shows in the Pods and the list besides.
var memberListTries = []time.Duration{time.Second, time.Second, time.Second, 2 * time.Second, 2 * time.Second}

func (m *Monitor) memberList(ctx context.Context, endpoints []string) ([]MemberObservation, error) {
	if len(endpoints) == 0 {
		return nil, errNoEndpoints
	}
	if m.client == nil {
		c, err := NewEtcdClient(endpoints, m.cfg.TLS)
		if err != nil {
			return nil, err
		}
		m.client = c
	} else if !sets.New(m.client.Endpoints()...).Equal(sets.New(endpoints...)) {
		m.client.SetEndpoints(endpoints...)
	}
	var err error
	for _, try := range memberListTries {
		lctx, cancel := context.WithTimeout(ctx, try)
		var resp *clientv3.MemberListResponse
		resp, err = m.client.MemberList(lctx)
		cancel()
		if err == nil {
			out := make([]MemberObservation, 0, len(resp.Members))
			for _, mem := range resp.Members {
				out = append(out, MemberObservation{Name: mem.Name, Learner: mem.IsLearner})
			}
			return out, nil
		}
	}
	return nil, err
}

type monitorError string

func (e monitorError) Error() string { return string(e) }

const errNoEndpoints = monitorError("no Ready member Pod to ask")

// Timeline returns a copy of the samples so far (the monitor keeps running).
func (m *Monitor) Timeline() Timeline {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append(Timeline(nil), m.timeline...)
}

// Stop ends sampling and returns the full timeline.
func (m *Monitor) Stop() Timeline {
	m.cancel()
	<-m.done
	return m.Timeline()
}

// WaitForUnavailable is a Condition: the monitor has seen at least n unavailable.
func (m *Monitor) WaitForUnavailable(n int) Condition {
	return func(context.Context) (bool, error) {
		_, ok := m.Timeline().FirstReaching(n)
		return ok, nil
	}
}

// StaticMembers is a MonitorConfig.Expected for a fixed member set.
func StaticMembers(names ...string) func() []string {
	return func() []string { return names }
}
