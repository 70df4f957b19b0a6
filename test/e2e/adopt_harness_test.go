//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
	"github.com/etcd-steward/steward/test/e2e/framework"
)

// The adoption scenarios' harness: the source, the adopting cluster, clients that resolve
// cluster names, and the sampler that proves fault tolerance over the hand-over.

// adoptReplicas is the adopting cluster's spec.replicas in every scenario.
const adoptReplicas = 3

// adoptSourceCASecret is the Secret spec.bootstrap.join.caSecretName names for a TLS source.
const adoptSourceCASecret = "source-ca"

// startBitnami creates the chart's objects for version and waits until every member is Ready and
// the client Service routes to all of them.
func startBitnami(t *testing.T, ns, version string, replicas int) framework.BitnamiEtcd {
	t.Helper()
	return startBitnamiOf(t, framework.BitnamiEtcd{Namespace: ns, Name: adoptSourceName, Replicas: replicas, Image: f.EtcdImage(version)})
}

func startBitnamiOf(t *testing.T, src framework.BitnamiEtcd) framework.BitnamiEtcd {
	t.Helper()
	ns, replicas := src.Namespace, src.Replicas
	objs := []client.Object{src.HeadlessService(), src.ClientService(), src.StatefulSet()}
	if src.TLS != nil {
		certs, err := src.TLSSecret()
		if err != nil {
			t.Fatal(err)
		}
		objs = append([]client.Object{certs}, objs...)
	}
	for _, o := range objs {
		if err := f.Apply(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	f.WaitFor(t, ns, "the source's members Ready", 3*time.Minute, f.PodsReady(ns, src.Labels(), replicas))
	return src
}

// withSourceTLS gives src (named, sized, not yet started) a CA of the test's and the certificates
// it issues: the source's owner made that CA, its members and applications hold its certificates.
func withSourceTLS(t *testing.T, src framework.BitnamiEtcd) framework.BitnamiEtcd {
	t.Helper()
	var err error
	if src.TLS, err = framework.NewBitnamiTLS(src, time.Now()); err != nil {
		t.Fatal(err)
	}
	return src
}

// sourceClientTLS is the TLS of src's applications (a client certificate of the source's CA, that
// CA trusted), nil for a plaintext source. Steward's members serve certificates of that CA too
// and accept its client certificates, so it is also the configuration that reaches them.
func sourceClientTLS(src framework.BitnamiEtcd) *tls.Config {
	if src.TLS == nil {
		return nil
	}
	return src.TLS.ClientConfig()
}

// createAdopting creates the adopting cluster, after the Secret with the source's CA for a TLS
// source (as its owner would, with kubectl create secret tls); a failed test logs its
// status.adoption (with the checks) and the member list as the test ends.
func createAdopting(t *testing.T, ns string, src framework.BitnamiEtcd, version string) {
	t.Helper()
	if src.TLS != nil {
		ca, err := src.TLS.CASecret(ns, adoptSourceCASecret)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Apply(context.Background(), ca); err != nil {
			t.Fatal(err)
		}
	}
	create(t, adoptingCluster(ns, src, version))
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if ec, err := get(ctx, ns, adoptClusterName); err == nil {
			b, _ := json.MarshalIndent(ec.Status, "", "  ")
			t.Logf("status of %s at the end:\n%s", adoptClusterName, b)
		}
		var eps []string
		for _, p := range src.PodNames() {
			eps = append(eps, src.MemberClientURL(p))
		}
		if c, err := newHostClient(sourceClientTLS(src), "", "", append(eps, stewardClientURL(src))...); err == nil {
			ms, err := listMembers(ctx, c)
			t.Logf("member list at the end: %v %v", ms, err)
			_ = c.Close()
		}
	})
}

// adoptingCluster is the EtcdCluster that adopts src: the source's version, adoptReplicas members,
// joined through the chart's client Service. Plaintext for a plaintext source; for a TLS source
// TLS as by default, with the source's CA from adoptSourceCASecret (createAdopting writes it).
func adoptingCluster(ns string, src framework.BitnamiEtcd, version string) *stewardv1.EtcdCluster {
	return newCluster(ns, adoptClusterName, adoptReplicas, "", func(ec *stewardv1.EtcdCluster) {
		ec.Spec.Version = strings.TrimPrefix(version, "v")
		join := &stewardv1.JoinSpec{Endpoints: []string{src.ClientURL()}, StatefulSetName: src.Name}
		switch {
		case src.TLS != nil && src.TLS.PeersPlaintext:
			join.CASecretName = adoptSourceCASecret
			ec.Spec.TLS = &stewardv1.TLSSpec{Peer: stewardv1.TLSPlane{Enabled: ptr.To(false)}}
		case src.TLS != nil:
			join.CASecretName = adoptSourceCASecret
		default:
			ec.Spec.TLS = &stewardv1.TLSSpec{Enabled: ptr.To(false)}
		}
		ec.Spec.Bootstrap = &stewardv1.BootstrapSpec{Join: join}
	})
}

// stewardClientURL is Steward's client Service; its scheme is the source's, as Steward's members
// take the source's TLS.
func stewardClientURL(src framework.BitnamiEtcd) string {
	scheme := "http"
	if src.TLS != nil {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s.%s.svc:%d", scheme, resources.ClientServiceName(adoptClusterName), src.Namespace, resources.ClientPort)
}

// hostClient is a client of the test process that resolves Service and Pod names with the
// cluster DNS, as an application of src in a Pod does, with its TLS (sourceClientTLS).
func hostClient(t *testing.T, src framework.BitnamiEtcd, endpoints ...string) *clientv3.Client {
	return hostClientAs(t, src, "", "", endpoints...)
}

func hostClientAs(t *testing.T, src framework.BitnamiEtcd, user, password string, endpoints ...string) *clientv3.Client {
	t.Helper()
	c, err := newHostClient(sourceClientTLS(src), user, password, endpoints...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newHostClient is hostClient's client, closed by the caller; tc nil is plaintext.
func newHostClient(tc *tls.Config, user, password string, endpoints ...string) (*clientv3.Client, error) {
	dns := framework.ClusterDNS()
	if dns == "" {
		return nil, fmt.Errorf("STEWARD_E2E_CLUSTER_DNS is not set: the adoption tests resolve names with the cluster DNS (run them with make e2e)")
	}
	return clientv3.New(clientv3.Config{
		Endpoints: endpoints, Username: user, Password: password, TLS: tc,
		DialTimeout: 2 * time.Second, DialKeepAliveTime: 2 * time.Second, DialKeepAliveTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(framework.ServiceDialer(dns))},
	})
}

// clusterIDAndRevision reads the cluster ID (hex) and the current revision with a linearizable read.
func clusterIDAndRevision(t *testing.T, c *clientv3.Client) (string, int64) {
	t.Helper()
	var resp *clientv3.GetResponse
	err := framework.Poll(context.Background(), 30*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		resp, err = c.Get(ctx, "/adopt-probe")
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("reading the revision: %v", err)
	}
	return fmt.Sprintf("%x", resp.Header.ClusterId), resp.Header.Revision
}

// member is one etcd member as the member list shows it.
type member struct {
	id        uint64
	name      string
	peerURL   string
	clientURL string
	learner   bool
}

func (m member) String() string {
	s := fmt.Sprintf("%s(%x)", m.name, m.id)
	if m.learner {
		s += "[learner]"
	}
	return s
}

func listMembers(ctx context.Context, c *clientv3.Client) ([]member, error) {
	resp, err := c.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	var out []member
	for _, m := range resp.Members {
		x := member{id: m.ID, name: m.Name, learner: m.IsLearner}
		if len(m.PeerURLs) > 0 {
			x.peerURL = m.PeerURLs[0]
		}
		if len(m.ClientURLs) > 0 {
			x.clientURL = m.ClientURLs[0]
		}
		out = append(out, x)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].name < out[j].name || out[i].name == out[j].name && out[i].id < out[j].id
	})
	return out, nil
}

func memberSet(t *testing.T, c *clientv3.Client) []member {
	t.Helper()
	var ms []member
	err := framework.Poll(context.Background(), 30*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		ms, err = listMembers(ctx, c)
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("member list: %v", err)
	}
	return ms
}

// memberServes makes a linearizable read through one member alone, as an application of src.
func memberServes(src framework.BitnamiEtcd, url string) error {
	c, err := newHostClient(sourceClientTLS(src), "", "", url)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	return framework.Poll(context.Background(), 20*time.Second, func(ctx context.Context) (bool, error) {
		_, err := c.Get(ctx, "/adopt-probe")
		return err == nil, err
	})
}

// waitAdoptionPhase waits for status.adoption.phase and returns the cluster as it then was.
func waitAdoptionPhase(t *testing.T, ns string, phase stewardv1.AdoptionPhase, timeout time.Duration) *stewardv1.EtcdCluster {
	t.Helper()
	var ec *stewardv1.EtcdCluster
	f.WaitFor(t, ns, "adoption phase "+string(phase), timeout, func(ctx context.Context) (bool, error) {
		var err error
		if ec, err = get(ctx, ns, adoptClusterName); err != nil {
			return false, err
		}
		if a := ec.Status.Adoption; a != nil && a.Phase == phase {
			return true, nil
		}
		return false, fmt.Errorf("adoption %s", adoptionSummary(ctx, ns))
	})
	return ec
}

// adoptionSummary is status.adoption in one line (JSON), for wait errors and dumps.
func adoptionSummary(ctx context.Context, ns string) string {
	// A context of its own: the caller's is often the one that just expired (WaitFor's last
	// attempt), and the summary is what says why.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	ec, err := get(ctx, ns, adoptClusterName)
	if err != nil {
		return err.Error()
	}
	if ec.Status.Adoption == nil {
		return "unset (" + condition(ec, "Progressing") + ")"
	}
	a := *ec.Status.Adoption
	a.Checks = nil // long; the message says what failed
	b, _ := json.Marshal(a)
	return string(b)
}

// sourceScaledTo holds when the source StatefulSet asks for n replicas and exactly n of its Pods
// exist.
func sourceScaledTo(ctx context.Context, ns string, src framework.BitnamiEtcd, n int) (bool, error) {
	var sts appsv1.StatefulSet
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: src.Name}, &sts); err != nil {
		return false, err
	}
	pods, err := f.Pods(ctx, ns, src.Labels())
	if err != nil {
		return false, err
	}
	if r := ptr.Deref(sts.Spec.Replicas, 1); int(r) != n || len(pods) != n {
		return false, fmt.Errorf("StatefulSet replicas %d, %d Pods; want %d", r, len(pods), n)
	}
	return true, nil
}

// checkAdoptedSourceMembers: status names every source member, each Stopped with its Pod.
func checkAdoptedSourceMembers(t *testing.T, ec *stewardv1.EtcdCluster, src framework.BitnamiEtcd, before []member) {
	t.Helper()
	a := ec.Status.Adoption
	if a.StartedAt == nil || a.FinishedAt == nil {
		t.Errorf("status.adoption startedAt %v, finishedAt %v", a.StartedAt, a.FinishedAt)
	}
	if len(a.SourceMembers) != len(before) {
		t.Errorf("status.adoption.sourceMembers %+v, the source had %v", a.SourceMembers, before)
	}
	for _, s := range a.SourceMembers {
		if s.State == stewardv1.SourceServing || !slices.Contains(src.PodNames(), s.Pod) {
			t.Errorf("source member %+v at Done", s)
		}
	}
}

// checkTrafficKept: no acknowledged write lost (read back through c), no stale read, and the
// history linearizable.
func checkTrafficKept(t *testing.T, traffic *framework.Traffic, c *clientv3.Client, h framework.History, label string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lost, err := traffic.VerifyNoLostWrites(ctx, c, h)
	if err != nil {
		t.Fatalf("reading back the traffic's writes: %v", err)
	}
	if len(lost) > 0 {
		t.Errorf("%d acknowledged writes lost, first %+v", len(lost), lost[0])
	}
	if stale := h.StaleReads(); len(stale) > 0 {
		t.Errorf("%d stale reads, first %+v", len(stale), stale[0])
	}
	framework.AssertLinearizable(t, h, f.Artifacts, label)
	t.Logf("MEASURE %s traffic: %d acknowledged writes, 0 lost expected (%d lost), %d stale reads, %d failed requests",
		label, len(h.Acknowledged()), len(lost), len(h.StaleReads()), len(h.Failed()))
}

// writesSince counts the write requests started after from, acknowledged or not (a failed write
// may have been applied): each bumps the revision at most once.
func writesSince(h framework.History, from time.Time) int {
	n := 0
	for _, o := range h {
		if o.Kind != framework.OpGet && !o.Start.Before(from) {
			n++
		}
	}
	return n
}

// adoptWatch samples, every 500 ms, etcd's member list and each voter's health (a linearizable
// read through that member alone), and the adoption's status and the source's Pods, for the
// fault-tolerance bound and the timeline of the hand-over.
type adoptWatch struct {
	t   *testing.T
	ns  string
	src framework.BitnamiEtcd
	// bound is the fault tolerance every sample must show (framework.AdoptionFaultTolerance).
	bound int

	list    *clientv3.Client // member lists, through every known member
	members map[string]*clientv3.Client

	mu         sync.Mutex
	samples    int
	minFT      int
	straddles  int // samples in a row a listed voter refused a read as a learner
	minAt      string
	violations []string
	timeline   []adoptEvent
	last       map[uint64]member // the latest member list
	primed     bool              // last holds the first list: members are added from the next
	lastPhase  stewardv1.AdoptionPhase
	lastSource map[string]stewardv1.SourceMemberState
	lastPods   map[string]bool

	stopc, done chan struct{}
}

type adoptEvent struct {
	at   time.Time
	what string
}

func watchAdoption(t *testing.T, ns string, src framework.BitnamiEtcd) *adoptWatch {
	t.Helper()
	var eps []string
	for _, p := range src.PodNames() {
		eps = append(eps, src.MemberClientURL(p))
	}
	w := &adoptWatch{t: t, ns: ns, src: src, bound: framework.AdoptionFaultTolerance(src.Replicas, adoptReplicas),
		list: hostClient(t, src, eps...), members: map[string]*clientv3.Client{},
		minFT: 1 << 30, last: map[uint64]member{}, lastSource: map[string]stewardv1.SourceMemberState{},
		lastPods: map[string]bool{}, stopc: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	t.Cleanup(w.stop)
	return w
}

func (w *adoptWatch) stop() {
	select {
	case <-w.stopc:
	default:
		close(w.stopc)
		<-w.done
		for _, c := range w.members {
			_ = c.Close()
		}
	}
}

func (w *adoptWatch) run() {
	defer close(w.done)
	for {
		start := time.Now()
		w.sample()
		w.observe()
		select {
		case <-w.stopc:
			return
		case <-time.After(time.Until(start.Add(500 * time.Millisecond))):
		}
	}
}

// sample takes the member list, probes every voter, and takes the list again: a sample whose two
// lists differ straddled a membership change and is not counted.
func (w *adoptWatch) sample() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	ms, err := listMembers(ctx, w.list)
	if err != nil {
		return
	}
	var voters []member
	var eps []string
	for _, m := range ms {
		if m.clientURL != "" {
			eps = append(eps, m.clientURL)
		}
		if !m.learner {
			voters = append(voters, m)
		}
	}
	probes := make([]framework.VoterProbe, len(voters))
	var wg sync.WaitGroup
	for i, m := range voters {
		probes[i] = framework.VoterProbe{Name: m.name, Err: fmt.Errorf("no client for %q", m.clientURL)}
		c := w.memberClient(m.clientURL)
		if c == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			probes[i].Err = probeVoter(c)
		}()
	}
	wg.Wait()
	actx, acancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer acancel()
	again, err := listMembers(actx, w.list)
	if err != nil || fmt.Sprint(again) != fmt.Sprint(ms) {
		return
	}
	ft, sick, counted := framework.FaultTolerance(probes)
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !counted {
		// A promotion is applied on the promoted member within a heartbeat or so; a voter that
		// still calls itself a learner two seconds on is a fault, not a straddle.
		if w.straddles++; w.straddles >= 4 {
			w.violations = append(w.violations, fmt.Sprintf("%s: a voter of %v refused reads as a learner in %d samples in a row",
				now.Format("15:04:05.000"), ms, w.straddles))
		}
		return
	}
	w.straddles = 0
	w.samples++
	desc := fmt.Sprintf("%s: %d voters, %d healthy (unhealthy %v), members %v", now.Format("15:04:05.000"), len(voters), len(voters)-len(sick), sick, ms)
	if ft < w.minFT {
		w.minFT, w.minAt = ft, desc
	}
	if ft < w.bound {
		w.violations = append(w.violations, desc)
	}
	seen := map[uint64]bool{}
	for _, m := range ms {
		seen[m.id] = true
		prev, ok := w.last[m.id]
		switch {
		case !ok && w.primed && m.learner:
			w.timeline = append(w.timeline, adoptEvent{now, m.String() + " added as learner"})
		case !ok && w.primed:
			w.timeline = append(w.timeline, adoptEvent{now, m.String() + " added as voter"})
		case ok && prev.learner && !m.learner:
			w.timeline = append(w.timeline, adoptEvent{now, m.name + " promoted"})
		case ok && prev.name == "" && m.name != "":
			w.timeline = append(w.timeline, adoptEvent{now, m.String() + " started"})
		}
		w.last[m.id] = m
	}
	w.primed = true
	for id, m := range w.last {
		if !seen[id] {
			w.timeline = append(w.timeline, adoptEvent{now, m.name + " removed"})
			delete(w.last, id)
		}
	}
	// The list client follows the membership (the source's members go away).
	if len(eps) > 0 {
		w.list.SetEndpoints(eps...)
	}
}

// probeVoter reads through one voter linearizably. A read that only ran out of time gets one more
// try, longer: at the end of a full suite on 2 cores a healthy voter once took over 2 s to answer
// and counted as a lost one. A voter down or cut off fails both.
func probeVoter(c *clientv3.Client) error {
	var err error
	for _, d := range []time.Duration{2 * time.Second, 4 * time.Second} {
		rctx, rcancel := context.WithTimeout(context.Background(), d)
		_, err = c.Get(rctx, "/adopt-probe")
		rcancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
	return err
}

func (w *adoptWatch) memberClient(url string) *clientv3.Client {
	if url == "" {
		return nil
	}
	if c, ok := w.members[url]; ok {
		return c
	}
	c, err := newHostClient(sourceClientTLS(w.src), "", "", url)
	if err != nil {
		return nil
	}
	w.members[url] = c
	return c
}

// observe records the adoption's phase, its source members' states and the source's Pods.
func (w *adoptWatch) observe() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	now := time.Now()
	ec, err := get(ctx, w.ns, adoptClusterName)
	pods, perr := f.Pods(ctx, w.ns, w.src.Labels())
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil && ec.Status.Adoption != nil {
		a := ec.Status.Adoption
		if a.Phase != w.lastPhase {
			w.timeline = append(w.timeline, adoptEvent{now, "phase " + string(a.Phase) + ": " + a.Message})
			w.lastPhase = a.Phase
		}
		for _, s := range a.SourceMembers {
			if w.lastSource[s.Name] != s.State {
				w.timeline = append(w.timeline, adoptEvent{now, fmt.Sprintf("status: source %s %s", s.Name, s.State)})
				w.lastSource[s.Name] = s.State
			}
		}
	}
	if perr == nil {
		present := map[string]bool{}
		for _, p := range pods {
			present[p.Name] = true
		}
		for name := range w.lastPods {
			if !present[name] {
				w.timeline = append(w.timeline, adoptEvent{now, "Pod " + name + " gone"})
				delete(w.lastPods, name)
			}
		}
		for name := range present {
			w.lastPods[name] = true
		}
	}
}

// report fails on any sample below the bound's fault tolerance and logs the minimum and the
// timeline, with the time each source member took to hand over (from the previous removal, the
// first from creation).
func (w *adoptWatch) report(label string, created time.Time, requireFT bool) {
	t := w.t
	t.Helper()
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.violations) > 0 && !requireFT {
		t.Logf("%d of %d samples below fault tolerance %d (not required here), first: %s", len(w.violations), w.samples, w.bound, w.violations[0])
	} else if len(w.violations) > 0 {
		t.Errorf("%d of %d samples below fault tolerance %d (healthy voters < voters/2+1+%d), first: %s",
			len(w.violations), w.samples, w.bound, w.bound, w.violations[0])
	}
	var b strings.Builder
	prev := created
	var perMember []string
	for _, e := range w.timeline {
		fmt.Fprintf(&b, "  +%6.1fs %s\n", e.at.Sub(created).Seconds(), e.what)
		if strings.HasSuffix(e.what, " removed") && slices.Contains(w.src.PodNames(), strings.TrimSuffix(e.what, " removed")) {
			perMember = append(perMember, fmt.Sprintf("%s %.1fs", strings.TrimSuffix(e.what, " removed"), e.at.Sub(prev).Seconds()))
			prev = e.at
		}
	}
	t.Logf("MEASURE %s: fault tolerance min %d (bound %d) over %d samples (at %s); source members handed over in %v",
		label, w.minFT, w.bound, w.samples, w.minAt, perMember)
	t.Logf("MEASURE %s timeline:\n%s", label, b.String())
}

// killOperatorAtEachStep kills the operator whenever the hand-over takes a step: a Steward member
// more is a voter, or a source member fewer serves (as status says). It returns a stop function
// that reports how many times it killed.
func killOperatorAtEachStep(t *testing.T, ns string) func() int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		kills, last := 0, ""
		defer func() { done <- kills }()
		for ctx.Err() == nil {
			time.Sleep(500 * time.Millisecond)
			ec, err := get(ctx, ns, adoptClusterName)
			if err != nil || ec.Status.Adoption == nil {
				continue
			}
			if ec.Status.Adoption.Phase == stewardv1.AdoptionDone {
				return
			}
			voters, serving := 0, 0
			for _, m := range ec.Status.Members {
				if m.Role == stewardv1.RoleLeader || m.Role == stewardv1.RoleFollower {
					voters++
				}
			}
			for _, s := range ec.Status.Adoption.SourceMembers {
				if s.State == stewardv1.SourceServing {
					serving++
				}
			}
			step := fmt.Sprintf("%d/%d", voters, serving)
			if last != "" && step != last {
				t.Logf("hand-over step %s -> %s: killing the operator", last, step)
				// Not killOperator: t.Fatal must not be called off the test's goroutine.
				if err := killOperatorNow(ctx); err != nil && ctx.Err() == nil {
					t.Errorf("%v", err)
				}
				kills++
			}
			last = step
		}
	}()
	return func() int { cancel(); return <-done }
}
