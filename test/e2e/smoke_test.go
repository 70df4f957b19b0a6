//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-steward/steward/test/e2e/framework"
)

// The smoke tests prove the environment and the framework, not the operator's logic:
// the operator is installed and Available, etcd images run and are reachable from the
// test process, and the traffic generator and disruption monitor work against
// hand-made etcd Pods.

func TestOperatorDeploymentReady(t *testing.T) {
	f.WaitFor(t, f.OperatorNamespace, "the operator Deployment to be Available", 2*time.Minute, func(ctx context.Context) (bool, error) {
		var d appsv1.Deployment
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: f.OperatorNamespace, Name: f.OperatorDeployment}, &d); err != nil {
			return false, err
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
				return d.Status.ReadyReplicas >= 1, nil
			}
		}
		return false, nil
	})
}

// TestEtcdImages starts a one-member etcd from each built image, talks to it from the
// test process by Pod IP, and runs etcdctl and a shell inside it.
func TestEtcdImages(t *testing.T) {
	for _, version := range f.EtcdVersions {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			set := framework.EtcdSet{Namespace: f.Namespace(t), Name: "solo", Replicas: 1, Image: f.EtcdImage(version)}
			pods := startEtcdSet(t, set)

			c := f.EtcdClient(t, nil, pods...)
			if _, err := c.Put(ctx, "/smoke", version); err != nil {
				t.Fatalf("put: %v", err)
			}
			st, err := c.Status(ctx, framework.PodClientURL(pods[0], false))
			if err != nil {
				t.Fatalf("status: %v", err)
			}
			if want := strings.TrimPrefix(version, "v"); st.Version != want {
				t.Fatalf("server version %s, want %s", st.Version, want)
			}
			out, err := f.Kubectl(ctx, "-n", set.Namespace, "exec", pods[0].Name, "--",
				"sh", "-c", "etcdctl get /smoke --print-value-only && etcdctl endpoint status -w table")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(out, version+"\n") {
				t.Fatalf("etcdctl in the Pod printed %q, want the value %s first", out, version)
			}
			t.Logf("etcd %s: reachable at %s; in-Pod etcdctl:\n%s", version, framework.PodClientURL(pods[0], false), out)
		})
	}
}

// TestTrafficAndDisruption runs client traffic against a hand-made 3-member etcd,
// deletes one member's Pod, and checks what both tools record: no acknowledged write
// lost, 0 members unavailable at steady state, exactly 1 after the deletion.
func TestTrafficAndDisruption(t *testing.T) {
	ctx := context.Background()
	set := framework.EtcdSet{Namespace: f.Namespace(t), Name: "trio", Replicas: 3, Image: f.EtcdImage(f.DefaultEtcdVersion())}
	pods := startEtcdSet(t, set)

	mon := f.StartMonitor(framework.MonitorConfig{
		Namespace: set.Namespace, Labels: set.Labels(), Expected: framework.StaticMembers(set.MemberNames()...),
	})
	defer mon.Stop()
	c := f.EtcdClient(t, nil, pods...)
	traffic := framework.StartTraffic(c, framework.TrafficConfig{Prefix: "/smoke/"})
	defer traffic.Stop()

	time.Sleep(3 * time.Second)
	if tl := mon.Timeline(); tl.Max() != 0 || len(tl) < 10 {
		t.Fatalf("steady state: %d samples, max unavailable %d, want >=10 samples and 0:\n%s", len(tl), tl.Max(), tl)
	}
	if acked := len(traffic.Snapshot().Acknowledged()); acked == 0 {
		t.Fatal("no acknowledged writes after 3s of traffic")
	}

	victim := pods[len(pods)-1]
	t.Logf("deleting pod %s", victim.Name)
	if err := f.Client.Delete(ctx, victim); err != nil {
		t.Fatal(err)
	}
	f.WaitFor(t, set.Namespace, "the monitor to see 1 unavailable member", time.Minute, mon.WaitForUnavailable(1))
	time.Sleep(2 * time.Second) // traffic continues on the remaining quorum

	history := traffic.Stop()
	timeline := mon.Stop()
	t.Logf("traffic: %s", history.Summary())
	t.Logf("disruption timeline (changes only):\n%s", timeline)

	if got := timeline.Max(); got != 1 {
		t.Errorf("max unavailable = %d, want 1", got)
	}
	if last := timeline[len(timeline)-1]; last.Unavailable != 1 || !strings.Contains(last.String(), victim.Name+": "+framework.ReasonPodMissing) {
		t.Errorf("last sample = %s, want only %s unavailable, its Pod missing", last, victim.Name)
	}
	acked := history.Acknowledged()
	if len(acked) < 50 {
		t.Errorf("only %d acknowledged writes; the generator should manage far more in 5s", len(acked))
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	lost, err := traffic.VerifyNoLostWrites(rctx, c, history)
	if err != nil {
		t.Fatalf("reading back: %v", err)
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d acknowledged writes lost, first: %+v", len(lost), len(acked), lost[0])
	}
	if stale := history.StaleReads(); len(stale) > 0 {
		t.Errorf("%d stale reads, first: %+v", len(stale), stale[0])
	}
}

// startEtcdSet creates the set's Service and Pods and waits until every member is
// Ready and serves a linearizable read; it returns the Pods as they are then.
func startEtcdSet(t *testing.T, set framework.EtcdSet) []*corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if err := f.Apply(ctx, set.Service()); err != nil {
		t.Fatal(err)
	}
	for _, p := range set.Pods() {
		if err := f.Apply(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	f.WaitFor(t, set.Namespace, "etcd pods Ready", 2*time.Minute, f.PodsReady(set.Namespace, set.Labels(), set.Replicas))
	pods, err := f.Pods(ctx, set.Namespace, set.Labels())
	if err != nil {
		t.Fatal(err)
	}
	var eps []string
	for _, p := range pods {
		eps = append(eps, framework.PodClientURL(p, false))
	}
	f.WaitFor(t, set.Namespace, "etcd to serve reads on every member", time.Minute, framework.EtcdHealthy(eps, nil))
	return pods
}
