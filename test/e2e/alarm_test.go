//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
)

// TestNOSPACEAlarm (issue 10, defect 2): a cluster whose quota fills raises NOSPACE on every
// member. Before, the probes failed on the alarm: the kubelet restarted all three members in a
// loop, the client Service lost its endpoints and status said QuorumLost. Now no Pod restarts,
// the Service keeps serving reads, status names the alarm, and after the user compacts,
// defragments and disarms with etcdctl the cluster is healthy again.
func TestNOSPACEAlarm(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "db", 3, "", func(ec *stewardv1.EtcdCluster) {
		ec.Spec.Options.QuotaBackendBytes = ptr.To(resource.MustParse("16Mi"))
		// The human's recovery is what this scenario is about; TestNOSPACERecovered is Steward's.
		ec.Spec.Maintenance = &stewardv1.MaintenanceSpec{NoSpace: stewardv1.NoSpaceReport}
	})
	before := restartCounts(t, ns, "db")
	cl := clientFor(t, ns, "db")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	fillUntilNoSpace(t, cl)

	f.WaitFor(t, ns, "Degraded=Alarm naming NOSPACE", 2*time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, "db")
		if err != nil {
			return false, err
		}
		d := meta.FindStatusCondition(ec.Status.Conditions, "Degraded")
		ok := d != nil && d.Status == "True" && d.Reason == "Alarm" && strings.Contains(d.Message, "NOSPACE alarm raised on db-") &&
			meta.IsStatusConditionTrue(ec.Status.Conditions, "Available")
		return ok, fmt.Errorf("%s; %s", condition(ec, "Degraded"), condition(ec, "Available"))
	})
	measure(t, "NOSPACE to Degraded=Alarm", time.Since(start))
	ec, _ := get(context.Background(), ns, "db")
	t.Logf("under NOSPACE: %s; %s", condition(ec, "Degraded"), condition(ec, "Available"))

	// Hold well past the point where the old probes had restarted every member (75 s observed;
	// liveness gives up after 8 failures 5 s apart): Pods stay up, Ready, and behind the Service.
	hold := time.Now().Add(90 * time.Second)
	for time.Now().Before(hold) {
		if got := restartCounts(t, ns, "db"); !equalCounts(got, before) {
			t.Fatalf("a member restarted under NOSPACE: restarts %v, before %v", got, before)
		}
		if n := readyServiceEndpoints(t, ns, "db"); n != 3 {
			t.Fatalf("the client Service has %d ready endpoints under NOSPACE, want 3", n)
		}
		if _, err := cl.Get(ctx, "/fill", clientv3.WithCountOnly()); err != nil {
			t.Fatalf("a read through the client Service failed under NOSPACE: %v", err)
		}
		time.Sleep(5 * time.Second)
	}

	// The user's recovery, as etcd documents it, from inside a member.
	start = time.Now()
	etcdctl := "/usr/local/bin/etcdctl --endpoints https://localhost:2379 --cacert " + resources.TLSMountPath + "/client-ca.crt " +
		"--cert " + resources.TLSMountPath + "/server.crt --key " + resources.TLSMountPath + "/server.key"
	script := fmt.Sprintf(`set -e; E=%q
rev=$($E endpoint status -w json | grep -o '"revision":[0-9]*' | head -1 | cut -d: -f2)
$E compact "$rev"; $E defrag --cluster; $E alarm disarm; $E alarm list`, etcdctl)
	out, err := f.Kubectl(ctx, "-n", ns, "exec", "db-0", "--", "sh", "-c", script)
	if err != nil {
		f.Dump(t, ns)
		t.Fatalf("compact, defrag, disarm: %v\n%s", err, out)
	}
	t.Logf("etcdctl:\n%s", out)
	disarmed := time.Now()
	// settled does not look at Degraded, and status still shows the alarm until the next reconcile.
	f.WaitFor(t, ns, "Degraded=False after disarm", 2*time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, "db")
		if err != nil {
			return false, err
		}
		return meta.IsStatusConditionFalse(ec.Status.Conditions, "Degraded"), fmt.Errorf("%s", condition(ec, "Degraded"))
	})
	waitSettled(t, ns, "db", 3, 3*time.Minute)
	measure(t, "disarm to Available and not Degraded", time.Since(disarmed))
	measure(t, "compact + defrag + disarm + recovery", time.Since(start))
	if _, err := cl.Put(ctx, "/after", "ok"); err != nil {
		t.Errorf("a write after the recovery failed: %v", err)
	}
	if got := restartCounts(t, ns, "db"); !equalCounts(got, before) {
		t.Errorf("restarts %v, before %v: nothing should have restarted", got, before)
	}
}

// fillUntilNoSpace overwrites one key with 512 KiB values until etcd refuses with NOSPACE: the
// old revisions fill the backend, and a compaction frees them all.
func fillUntilNoSpace(t *testing.T, cl *clientv3.Client) {
	t.Helper()
	start := time.Now()
	value := strings.Repeat("x", 512<<10)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for i := 0; ; i++ {
		_, err := cl.Put(ctx, "/fill", value)
		if err != nil && strings.Contains(err.Error(), "database space exceeded") {
			break
		}
		if i > 400 {
			t.Fatalf("no NOSPACE after %d puts of 512 KiB into a 16 MiB quota (last error %v)", i, err)
		}
	}
	measure(t, "filling a 16 MiB quota until NOSPACE", time.Since(start))
}

func restartCounts(t *testing.T, ns, name string) map[string]int32 {
	t.Helper()
	out := map[string]int32{}
	for n, p := range memberPods(t, ns, name) {
		out[n] = restarts(p)
	}
	return out
}

func equalCounts(a, b map[string]int32) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// readyServiceEndpoints counts the ready endpoints of the cluster's client Service.
func readyServiceEndpoints(t *testing.T, ns, name string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var slices discoveryv1.EndpointSliceList
	err := f.Client.List(ctx, &slices, client.InNamespace(ns),
		client.MatchingLabels{discoveryv1.LabelServiceName: resources.ClientServiceName(name)})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				n++
			}
		}
	}
	return n
}
