//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
	"github.com/etcd-steward/steward/test/e2e/framework"
)

// Helpers for tests of EtcdClusters run by the operator under test.

// etcdVersion is the version clusters run unless a test says otherwise.
func etcdVersion() string { return strings.TrimPrefix(f.DefaultEtcdVersion(), "v") }

// versionOf returns the built version of a minor ("3.5" → "3.5.35"), skipping the test if the
// environment did not build it.
func versionOf(t *testing.T, minor string) string {
	for _, v := range f.EtcdVersions {
		if strings.HasPrefix(v, "v"+minor+".") {
			return strings.TrimPrefix(v, "v")
		}
	}
	t.Fatalf("etcd %s was not built (STEWARD_E2E_ETCD_VERSIONS=%v)", minor, f.EtcdVersions)
	return ""
}

// newCluster builds an EtcdCluster; mutate adjusts it before creation.
func newCluster(ns, name string, replicas int32, medium stewardv1.StorageMedium, mutate ...func(*stewardv1.EtcdCluster)) *stewardv1.EtcdCluster {
	size := resource.MustParse("256Mi")
	ec := &stewardv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: stewardv1.EtcdClusterSpec{
			Replicas: ptr.To(replicas),
			MemberTemplate: stewardv1.MemberTemplate{
				Version: etcdVersion(),
				Storage: stewardv1.StorageSpec{Medium: medium, Size: &size},
			},
		},
	}
	for _, m := range mutate {
		m(ec)
	}
	return ec
}

// settledCluster creates a cluster in a fresh namespace and waits until it settles: the
// starting point of most scenarios. It returns the namespace.
func settledCluster(t *testing.T, name string, replicas int32, medium stewardv1.StorageMedium,
	mutate ...func(*stewardv1.EtcdCluster)) string {
	t.Helper()
	ns := f.Namespace(t)
	create(t, newCluster(ns, name, replicas, medium, mutate...))
	waitSettled(t, ns, name, replicas, 4*time.Minute)
	return ns
}

func create(t *testing.T, ec *stewardv1.EtcdCluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.Client.Create(ctx, ec); err != nil {
		t.Fatalf("creating EtcdCluster %s: %v", ec.Name, err)
	}
}

// update re-reads the cluster, applies change and writes it, retrying on conflicts (the operator
// writes status concurrently; spec writes may still conflict on resourceVersion).
func update(t *testing.T, ns, name string, change func(*stewardv1.EtcdCluster)) {
	t.Helper()
	if err := tryUpdate(ns, name, change); err != nil {
		t.Fatalf("updating %s: %v", name, err)
	}
}

// tryUpdate is update for a change admission may refuse: it retries a conflict with the
// operator's own writes on a fresh read and returns any other error.
func tryUpdate(ns, name string, change func(*stewardv1.EtcdCluster)) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		var ec stewardv1.EtcdCluster
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &ec); err != nil {
			return err
		}
		change(&ec)
		err := f.Client.Update(ctx, &ec)
		if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "the object has been modified") {
			return err
		}
	}
}

func get(ctx context.Context, ns, name string) (*stewardv1.EtcdCluster, error) {
	var ec stewardv1.EtcdCluster
	err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &ec)
	return &ec, err
}

// settled holds when the cluster reports what the user asked for: the current generation
// observed, every member ready and updated, Available, nothing progressing or rolling.
func settled(ns, name string, replicas int32) framework.Condition {
	// What the Pods show is for the failure message only: read at most every 5 s, not on each
	// poll (a LIST of the namespace's Pods 4 times a second while a cluster forms was the suite's
	// largest response volume at the API server after the polls of the clusters themselves).
	var pods string
	var podsRead time.Time
	return func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, name)
		if err != nil {
			return false, err
		}
		s := ec.Status
		switch {
		case s.ObservedGeneration != ec.Generation:
			return false, fmt.Errorf("observedGeneration %d of %d", s.ObservedGeneration, ec.Generation)
		case s.ReadyMembers != replicas || s.UpdatedMembers != replicas || s.Replicas != replicas:
			if time.Since(podsRead) > 5*time.Second {
				pods, podsRead = unreadyMembers(ctx, ns, ec), time.Now()
			}
			return false, fmt.Errorf("ready %d, updated %d, members %d; want %d%s", s.ReadyMembers, s.UpdatedMembers,
				s.Replicas, replicas, pods)
		case replicas > 0 && !meta.IsStatusConditionTrue(s.Conditions, "Available"):
			return false, fmt.Errorf("not Available: %s", condition(ec, "Available"))
		case meta.IsStatusConditionTrue(s.Conditions, "Progressing"):
			return false, fmt.Errorf("still Progressing: %s", condition(ec, "Progressing"))
		case meta.IsStatusConditionTrue(s.Conditions, "RollingUpdate"):
			return false, fmt.Errorf("still RollingUpdate: %s", condition(ec, "RollingUpdate"))
		}
		return true, nil
	}
}

// unreadyMembers names the members status does not count as ready, each with what its Pod shows,
// so that a wait that times out says whether the kubelet, etcd or the operator held it.
func unreadyMembers(ctx context.Context, ns string, ec *stewardv1.EtcdCluster) string {
	if !slices.ContainsFunc(ec.Status.Members, func(m stewardv1.MemberStatus) bool { return !m.Ready }) {
		return ""
	}
	pods, _ := f.Pods(ctx, ns, map[string]string{stewardv1.LabelCluster: ec.Name})
	byName := map[string]*corev1.Pod{}
	for _, p := range pods {
		byName[p.Name] = p
	}
	var out []string
	for _, m := range ec.Status.Members {
		if m.Ready {
			continue
		}
		out = append(out, fmt.Sprintf("%s (%s, updated %t): %s", m.Name, m.Role, m.Updated, podState(byName[m.Name])))
	}
	if len(out) == 0 {
		return ""
	}
	return "; unready: " + strings.Join(out, "; ")
}

// podState is a Pod's readiness, restarts, and each container's state and last end, in one line.
func podState(p *corev1.Pod) string {
	if p == nil {
		return "no Pod"
	}
	s := fmt.Sprintf("Pod ready %t, restarts %d", framework.PodReady(p), restarts(p))
	if p.DeletionTimestamp != nil {
		s += ", deleting"
	}
	// An init container that has not ended is what a PodInitializing Pod waits on (a restore's
	// fetch, say): name it and how long it has run.
	for _, c := range p.Status.InitContainerStatuses {
		switch {
		case c.State.Running != nil:
			s += fmt.Sprintf(", init %s running since %s", c.Name, c.State.Running.StartedAt.UTC().Format(time.TimeOnly))
		case c.State.Waiting != nil:
			s += fmt.Sprintf(", init %s waiting (%s)", c.Name, c.State.Waiting.Reason)
		case c.State.Terminated != nil && c.State.Terminated.ExitCode != 0:
			s += fmt.Sprintf(", init %s ended %s (exit %d)", c.Name, c.State.Terminated.Reason, c.State.Terminated.ExitCode)
		}
	}
	for _, c := range p.Status.ContainerStatuses {
		switch {
		case c.State.Waiting != nil:
			s += fmt.Sprintf(", %s waiting (%s)", c.Name, c.State.Waiting.Reason)
		case c.State.Running != nil:
			s += fmt.Sprintf(", %s running since %s", c.Name, c.State.Running.StartedAt.UTC().Format(time.TimeOnly))
		}
		if lt := c.LastTerminationState.Terminated; lt != nil {
			s += fmt.Sprintf(", last ended %s (%s, exit %d)", lt.FinishedAt.UTC().Format(time.TimeOnly), lt.Reason, lt.ExitCode)
		}
	}
	return s
}

func condition(ec *stewardv1.EtcdCluster, typ string) string {
	c := meta.FindStatusCondition(ec.Status.Conditions, typ)
	if c == nil {
		return typ + " unset"
	}
	return fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
}

// waitSettled waits for settled and returns how long it took.
func waitSettled(t *testing.T, ns, name string, replicas int32, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	f.WaitFor(t, ns, fmt.Sprintf("%s settled at %d members", name, replicas), timeout, settled(ns, name, replicas))
	return time.Since(start)
}

// memberNames are the names of ordinals 0..n-1.
func memberNames(name string, n int32) []string {
	var out []string
	for i := range n {
		out = append(out, resources.MemberName(name, i))
	}
	return out
}

// clientFor connects to the cluster through its client Service (ready voters only), the way an
// application in the cluster would; the host reaches Service IPs through kube-proxy. With TLS on
// (the default) it dials https with the cluster's client Secret, reloaded as the operator renews
// it, and checks the server certificate names the Service (it names no ClusterIP).
func clientFor(t *testing.T, ns, name string) *clientv3.Client {
	t.Helper()
	var tc *framework.ClientTLS
	if tlsEnabled(t, ns, name) {
		tc = clientTLSFor(t, ns, name)
	}
	return clientWith(t, ns, name, tc)
}

// clientWith is clientFor presenting the certificate tc follows (nil: plaintext).
func clientWith(t *testing.T, ns, name string, ctls *framework.ClientTLS) *clientv3.Client {
	t.Helper()
	var svc corev1.Service
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.ClientServiceName(name)}, &svc); err != nil {
		t.Fatal(err)
	}
	scheme, tc := "http", (*tls.Config)(nil)
	if ctls != nil {
		scheme = "https"
		tc = ctls.Config(clientServiceHost(ns, name))
	}
	// By name through the cluster DNS, as an application in a Pod would (the documented client
	// path); by ClusterIP where the environment names no DNS server.
	var c *clientv3.Client
	var err error
	if dns := os.Getenv("STEWARD_E2E_CLUSTER_DNS"); dns != "" {
		ep := fmt.Sprintf("%s://%s", scheme, net.JoinHostPort(clientServiceHost(ns, name), strconv.Itoa(resources.ClientPort)))
		c, err = framework.NewServiceClient(ep, dns, tc)
	} else {
		ep := fmt.Sprintf("%s://%s", scheme, net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(resources.ClientPort)))
		c, err = framework.NewEtcdClient([]string{ep}, tc)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// monitor watches the cluster's members for the whole test; expected may change (scale tests).
// It dials member Pods by IP, so with TLS on only the chain of their certificates is checked.
func monitor(t *testing.T, ns, name string, expected func() []string) *framework.Monitor {
	t.Helper()
	cfg := framework.MonitorConfig{Namespace: ns,
		Labels: map[string]string{stewardv1.LabelCluster: name}, Expected: expected}
	if tlsEnabled(t, ns, name) {
		cfg.TLS = clientTLSFor(t, ns, name).Config("")
	}
	m := f.StartMonitor(cfg)
	t.Cleanup(func() { m.Stop() })
	return m
}

// assertMaxUnavailable fails when more than max members were unavailable at any instant.
func assertMaxUnavailable(t *testing.T, m *framework.Monitor, max int) {
	t.Helper()
	tl := m.Stop()
	if got := tl.Max(); got > max {
		t.Errorf("%d members unavailable at once (allowed %d); timeline of changes:\n%s", got, max, tl.Changes())
	}
}

// putData writes n keys under prefix and returns them.
func putData(t *testing.T, c *clientv3.Client, prefix string, n int) map[string]string {
	t.Helper()
	want := map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		k, v := fmt.Sprintf("%s%04d", prefix, i), fmt.Sprintf("value-%d", i)
		if _, err := c.Put(ctx, k, v); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
		want[k] = v
	}
	return want
}

// checkData reads prefix back (linearizably) and compares.
func checkData(t *testing.T, c *clientv3.Client, prefix string, want map[string]string) {
	t.Helper()
	var got map[string]string
	err := framework.Poll(context.Background(), 30*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		got, err = framework.ReadPrefix(ctx, c, prefix)
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("reading %s back: %v", prefix, err)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("key %s = %q after the change, want %q (%d of %d keys present)", k, got[k], v, len(got), len(want))
		}
	}
}

// memberPods returns the cluster's Pods by name.
func memberPods(t *testing.T, ns, name string) map[string]*corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := f.Pods(ctx, ns, map[string]string{stewardv1.LabelCluster: name})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*corev1.Pod{}
	for _, p := range pods {
		out[p.Name] = p
	}
	return out
}

// leader is the member status.members names as leader.
func leader(t *testing.T, ns, name string) string {
	t.Helper()
	ec, err := get(context.Background(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ec.Status.Members {
		if m.Role == stewardv1.RoleLeader {
			return m.Name
		}
	}
	t.Fatalf("no leader in status: %+v", ec.Status.Members)
	return ""
}

// memberIDs maps member names to their etcd IDs as status reports them.
func memberIDs(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	ec, err := get(context.Background(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range ec.Status.Members {
		out[m.Name] = m.ID
	}
	return out
}

// measure logs a figure in a form docs and the closing note can be gathered from (grep MEASURE).
func measure(t *testing.T, what string, d time.Duration) {
	t.Logf("MEASURE %s: %.1fs", what, d.Seconds())
}
