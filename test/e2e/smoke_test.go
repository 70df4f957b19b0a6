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
// test process, the S3 server answers the host and Pods, and the traffic generator and
// disruption monitor work against hand-made etcd Pods.

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
// test process by Pod IP, and runs etcdctl, etcdutl and a shell inside it; the shell
// reaches the S3 server.
func TestEtcdImages(t *testing.T) {
	s3 := framework.RequireS3(t)
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
				"sh", "-c", "etcdctl get /smoke --print-value-only && etcdctl endpoint status -w table && "+
					"etcdutl version && wget -q -O- "+s3.Endpoint+"/health")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(out, version+"\n") {
				t.Fatalf("etcdctl in the Pod printed %q, want the value %s first", out, version)
			}
			if !strings.Contains(out, "etcdutl version: "+strings.TrimPrefix(version, "v")+"\n") {
				t.Fatalf("the Pod printed %q, want etcdutl's version %s", out, version)
			}
			if !strings.HasSuffix(strings.TrimSpace(out), "OK") {
				t.Fatalf("the Pod printed %q, want the S3 server's health answer OK last", out)
			}
			t.Logf("etcd %s: reachable at %s; in-Pod etcdctl:\n%s", version, framework.PodClientURL(pods[0], false), out)
		})
	}
}

// TestS3Server stores, lists, reads and deletes an object in the environment's bucket from
// the test process, and creates the credentials Secret a backup would name.
func TestS3Server(t *testing.T) {
	ctx := context.Background()
	s3 := framework.RequireS3(t)
	ns := f.Namespace(t)
	if err := f.CreateS3Secret(ctx, ns, "s3-credentials", s3.S3Config); err != nil {
		t.Fatal(err)
	}
	if ok, err := s3.Client.BucketExists(ctx, s3.Bucket); err != nil || !ok {
		t.Fatalf("bucket %s at %s: exists=%v, %v", s3.Bucket, s3.Endpoint, ok, err)
	}
	prefix := "e2e/" + ns + "/"
	want := []byte("snapshot " + ns)
	if err := s3.Put(ctx, prefix+"a.db", want); err != nil {
		t.Fatalf("put: %v", err)
	}
	objs, err := s3.List(ctx, prefix)
	if err != nil || len(objs) != 1 || objs[0].Key != prefix+"a.db" || objs[0].Size != int64(len(want)) {
		t.Fatalf("list %s: %+v, %v; want the one object", prefix, objs, err)
	}
	if got, err := s3.Get(ctx, prefix+"a.db"); err != nil || string(got) != string(want) {
		t.Fatalf("get: %q, %v; want %q", got, err, want)
	}
	if err := s3.Delete(ctx, prefix); err != nil {
		t.Fatalf("delete %s: %v", prefix, err)
	}
	if objs, err := s3.List(ctx, prefix); err != nil || len(objs) != 0 {
		t.Fatalf("after delete: %+v, %v; want nothing", objs, err)
	}
	t.Logf("S3 server %s, bucket %s: put, list, get and delete work from the host", s3.Endpoint, s3.Bucket)
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
