//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-steward/steward/test/e2e/framework"
)

// TestStatefulSetBaseline (issue 13, item 6): the same etcd as a plain StatefulSet with PVCs, rolled
// by a template change, measured with the same traffic (by Service name) and the same Pod watch as
// Steward's rolls, for docs/performance.md. It asserts only what any roll must keep (no lost
// acknowledged write); the figures are the point.
func TestStatefulSetBaseline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := f.Namespace(t)
	set := framework.EtcdSet{Namespace: ns, Name: "base", Replicas: 3, Image: f.EtcdImage(f.DefaultEtcdVersion())}
	for _, o := range []client.Object{set.Service(), set.ClientService(), set.StatefulSet()} {
		if err := f.Apply(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	f.WaitFor(t, ns, "the StatefulSet's members Ready", 3*time.Minute, f.PodsReady(ns, set.Labels(), set.Replicas))
	c := baselineClient(t, ns, set)
	pods, err := f.WatchPodTimes(ns, "app.kubernetes.io/instance="+set.Name, "")
	if err != nil {
		t.Fatal(err)
	}
	defer pods.Stop()
	leaders := watchLeaders(t, ns, set, c)
	traffic := framework.StartTraffic(c, framework.TrafficConfig{Prefix: "/base/"})
	time.Sleep(5 * time.Second)

	changed := time.Now()
	var sts appsv1.StatefulSet
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: set.Name}, &sts); err != nil {
		t.Fatal(err)
	}
	base := sts.DeepCopy()
	sts.Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": changed.Format(time.RFC3339)}
	if err := f.Client.Patch(ctx, &sts, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	f.WaitFor(t, ns, "the StatefulSet rolled", 5*time.Minute, func(ctx context.Context) (bool, error) {
		var now appsv1.StatefulSet
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(&sts), &now); err != nil {
			return false, err
		}
		s := now.Status
		return s.ObservedGeneration >= now.Generation && s.UpdateRevision == s.CurrentRevision && s.UpdatedReplicas == 3 &&
			s.ReadyReplicas == 3, fmt.Errorf("updated %d, ready %d", s.UpdatedReplicas, s.ReadyReplicas)
	})
	rolled := time.Since(changed)
	h := traffic.Stop()
	vctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	lost, err := traffic.VerifyNoLostWrites(vctx, c, h)
	if err != nil {
		t.Fatal(err)
	}
	if len(lost) > 0 {
		t.Errorf("%d acknowledged writes lost", len(lost))
	}
	restarts := pods.Restarts()
	var worst time.Duration
	for _, r := range restarts {
		worst = max(worst, r.Unavailable())
	}
	before, during := split(h, changed)
	label := "statefulset rolling restart 3-pvc"
	t.Logf("MEASURE %s: roll %.1fs; leaders %v", label, rolled.Seconds(), leaders())
	t.Logf("MEASURE %s: %d member restarts, longest unavailable %.2fs\n%s", label, len(restarts), worst.Seconds(), framework.Summary(restarts))
	t.Logf("MEASURE %s steady: %s", label, before.Summary())
	t.Logf("MEASURE %s during roll: %s", label, during.Summary())
}

// baselineClient dials the baseline's client Service by name through the cluster DNS (by ClusterIP
// where no DNS server is given).
func baselineClient(t *testing.T, ns string, set framework.EtcdSet) *clientv3.Client {
	t.Helper()
	var c *clientv3.Client
	var err error
	if dns := os.Getenv("STEWARD_E2E_CLUSTER_DNS"); dns != "" {
		c, err = framework.NewServiceClient(fmt.Sprintf("http://%s-client.%s.svc:2379", set.Name, ns), dns, nil)
	} else {
		var svc corev1.Service
		if err := f.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: set.Name + "-client"}, &svc); err != nil {
			t.Fatal(err)
		}
		c, err = framework.NewEtcdClient([]string{"http://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(2379))}, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// watchLeaders polls every member for the leader it knows (every 200 ms) and returns a function
// giving the distinct consecutive leaders seen, by member name.
func watchLeaders(t *testing.T, ns string, set framework.EtcdSet, c *clientv3.Client) func() []string {
	var mu sync.Mutex
	var seen []string
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			pods, err := f.Pods(context.Background(), ns, set.Labels())
			if err != nil {
				continue
			}
			for _, p := range pods {
				if p.Status.PodIP == "" {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				st, err := c.Status(ctx, framework.PodClientURL(p, false))
				cancel()
				if err != nil || st.Leader == 0 || st.Leader != st.Header.MemberId {
					continue
				}
				mu.Lock()
				if n := len(seen); n == 0 || seen[n-1] != p.Name {
					seen = append(seen, p.Name)
				}
				mu.Unlock()
			}
		}
	}()
	stopped := false
	halt := func() {
		if !stopped {
			stopped = true
			close(stop)
			<-done
		}
	}
	t.Cleanup(halt)
	return func() []string {
		halt()
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}
