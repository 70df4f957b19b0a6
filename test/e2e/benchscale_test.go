//go:build e2e && bench

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/metrics"
	"github.com/etcd-steward/steward/internal/resources"
	"github.com/etcd-steward/steward/test/e2e/framework"
)

// TestBenchScale (issue 13, item 5; `make bench-scale`, outside CI): N one-member PVC clusters under
// one operator, real etcd Pods on the local Kubernetes. It reports the operator's resident memory
// and CPU at steady state, API writes per steady-state reconcile (target 0), and how long the
// operator takes to notice a member whose Pod was deleted and start repairing it (a new Pod).
// Figures go to the test log and to <artifacts>/bench-scale.json.
func TestBenchScale(t *testing.T) {
	n := 100
	if v, err := strconv.Atoi(os.Getenv("BENCH_CLUSTERS")); err == nil && v > 0 {
		n = v
	}
	benchOperator(t)
	ns := f.Namespace(t)
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			create(t, newCluster(ns, fmt.Sprintf("b%03d", i), 1, ""))
		}()
	}
	wg.Wait()
	f.WaitFor(t, ns, fmt.Sprintf("%d clusters Available", n), 30*time.Minute, func(ctx context.Context) (bool, error) {
		var list stewardv1.EtcdClusterList
		if err := f.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		ready := 0
		for _, ec := range list.Items {
			if ec.Status.ReadyMembers == 1 && ec.Status.UpdatedMembers == 1 {
				ready++
			}
		}
		return ready == n, fmt.Errorf("%d of %d ready", ready, n)
	})
	formed := time.Since(start)
	t.Logf("BENCH %d clusters formed in %s", n, formed.Round(time.Second))

	// Steady state: once the last creations' follow-ups are done (none of the clusters' objects
	// changed for 10 s; it was a fixed 30 s), watch a minute.
	quiet := waitObjectsQuiet(t, ns, 10*time.Second, time.Minute)
	t.Logf("BENCH objects quiet %s after all were Available", quiet.Round(time.Second))
	sc := newScraper(t, ns)
	ctx := context.Background()
	versionsBefore := objectVersions(t, ns)
	before, err := sc.families(ctx)
	if err != nil {
		t.Fatal(err)
	}
	window := 60 * time.Second
	ws := sampleWorkingSet(t)
	time.Sleep(window)
	wsPeak, wsMean, wsReadings := ws.result()
	after, err := sc.families(ctx)
	if err != nil {
		t.Fatal(err)
	}
	versionsAfter := objectVersions(t, ns)
	var written []string
	for k, v := range versionsAfter {
		if versionsBefore[k] != v {
			written = append(written, k)
		}
	}
	delta := func(name string, labels map[string]string) float64 {
		return sum(after, name, labels) - sum(before, name, labels)
	}
	reconciles := delta("controller_runtime_reconcile_total", map[string]string{"controller": "etcdcluster"})
	// Every write of the operator's client, leader election's Lease renewals included (one every
	// 2 s); the objects' resourceVersions say which of the clusters' own objects changed.
	writes := 0.0
	for _, verb := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		writes += delta("rest_client_requests_total", map[string]string{"method": verb})
	}
	byResource := writesByResource(before, after)
	cpu := delta("process_cpu_seconds_total", nil)
	rss := sum(after, "process_resident_memory_bytes", nil)
	heap := sum(after, "go_memstats_heap_inuse_bytes", nil)
	saveHeapProfile(t, "bench-scale-heap.pprof")

	// A member killed: its Pod deleted; time until the operator created the next one.
	victim := fmt.Sprintf("b%03d", n/2)
	pod := resources.MemberName(victim, 0)
	var old corev1.Pod
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pod}, &old); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := f.Client.Delete(ctx, &old, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	// Both on the test's clock: a Pod's creationTimestamp has whole seconds (it once put the new
	// Pod 0.06 s before the kill). noticed is an upper bound, the poll that first saw the new Pod.
	var noticed time.Duration
	f.WaitFor(t, ns, "a new Pod for "+pod, 2*time.Minute, func(ctx context.Context) (bool, error) {
		var p corev1.Pod
		err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pod}, &p)
		if err == nil && p.UID != old.UID {
			noticed = time.Since(killed)
			return true, nil
		}
		return false, client.IgnoreNotFound(err)
	})
	// Ready first: right after the kill, status may still say settled (it did: 0.46 s "repaired").
	f.WaitFor(t, ns, "the new "+pod+" Ready", 3*time.Minute, func(ctx context.Context) (bool, error) {
		var p corev1.Pod
		err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pod}, &p)
		return err == nil && p.UID != old.UID && framework.PodReady(&p), client.IgnoreNotFound(err)
	})
	waitSettled(t, ns, victim, 1, 3*time.Minute)
	repaired := time.Since(killed)

	report := map[string]any{
		"clusters":                 n,
		"formedSeconds":            formed.Seconds(),
		"windowSeconds":            window.Seconds(),
		"reconciles":               reconciles,
		"apiWritesAll":             writes,
		"apiWritesByResource":      byResource,
		"objectsWritten":           len(written),
		"objectWritesPerReconcile": ratio(float64(len(written)), reconciles),
		"operatorCPUCoresAvg":      cpu / window.Seconds(),
		"operatorRSSBytes":         rss,
		"operatorHeapInUseBytes":   heap,
		"operatorMemory":           memoryBreakdown(after),
		"workingSetPeakBytes":      wsPeak,
		"workingSetMeanBytes":      wsMean,
		"workingSetReadings":       wsReadings,
		"repairNoticedSeconds":     noticed.Seconds(),
		"repairedSeconds":          repaired.Seconds(),
		"maxConcurrentReconciles":  maxConcurrent(after),
	}
	b, _ := json.MarshalIndent(report, "", "  ")
	t.Logf("BENCH report:\n%s", b)
	// One line for docs/performance.md (hack/perfreport), its figures separated by "; ".
	mem, mib := memoryBreakdown(after), func(v float64) float64 { return v / (1 << 20) }
	t.Logf("MEASURE operator at %d clusters: all Available %.0fs after the first was created; "+
		"resident memory (RSS) %.1f MiB: anonymous %.1f MiB, file-backed (the binary's pages) %.1f MiB; "+
		"container working set (the kubelet's measure: usage less inactive page cache) %s, over the steady minute peak %.1f MiB, mean %.1f MiB (%d readings); Go heap in use %.1f MiB; %.0f goroutines; "+
		"CPU %.3f cores at steady state; %d of the clusters' objects written in %.0f reconciles of a minute; "+
		"a deleted member's Pod recreated %.2fs after the deletion, the cluster settled again %.1fs after it",
		n, formed.Seconds(), mib(rss), mib(mem["proc_rssanon_bytes"]), mib(mem["proc_rssfile_bytes"]), workingSet(mem), mib(wsPeak), mib(wsMean), wsReadings, mib(heap), mem["go_goroutines"],
		cpu/window.Seconds(), len(written), reconciles, noticed.Seconds(), repaired.Seconds())
	if err := os.WriteFile(filepath.Join(f.Artifacts, "bench-scale.json"), b, 0o644); err != nil {
		t.Log(err)
	}
	if len(written) > 0 {
		t.Errorf("%d of the clusters' objects written in %s of steady state (target 0): %v", len(written), window, written)
	}
}

// workingSet prints the container's working set, or says it was not read (a machine without the
// cgroup v1 memory controller): never a 0 that reads as a measure.
func workingSet(mem map[string]float64) string {
	ws, ok := mem["cgroup_working_set_bytes"]
	if !ok {
		return "not read (no cgroup v1 memory controller)"
	}
	return fmt.Sprintf("%.1f MiB", ws/(1<<20))
}

// writesByResource: Steward's own count of its write requests (steward_kube_api_requests_total),
// "verb resource" -> requests in the window, for the verbs that write.
func writesByResource(before, after map[string]*dto.MetricFamily) map[string]float64 {
	count := func(fams map[string]*dto.MetricFamily) map[string]float64 {
		out := map[string]float64{}
		for _, m := range fams[metrics.APIRequests.Name].GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			switch l["verb"] {
			case "create", "update", "patch", "delete", "deletecollection":
				out[l["verb"]+" "+l["resource"]] += m.GetCounter().GetValue()
			}
		}
		return out
	}
	b, a := count(before), count(after)
	out := map[string]float64{}
	for k, v := range a {
		if d := v - b[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// objectVersions are the resourceVersions of what the operator owns in ns (Pods aside: the kubelet
// writes their status).
func objectVersions(t *testing.T, ns string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := map[string]string{}
	lists := map[string]client.ObjectList{"EtcdCluster": &stewardv1.EtcdClusterList{}, "EtcdMember": &stewardv1.EtcdMemberList{},
		"Service": &corev1.ServiceList{}, "Secret": &corev1.SecretList{}, "PVC": &corev1.PersistentVolumeClaimList{},
		"PDB": &policyv1.PodDisruptionBudgetList{}, "Event": &corev1.EventList{}}
	for kind, l := range lists {
		if err := f.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range items {
			if e, ok := o.(*corev1.Event); ok && e.ReportingController != "steward" && e.Source.Component != "steward" {
				continue // the kubelet's (a probe that timed out on the loaded machine): not Steward's write
			}
			obj := o.(client.Object)
			out[kind+"/"+obj.GetName()] = obj.GetResourceVersion()
		}
	}
	return out
}

// waitObjectsQuiet returns once objectVersions has not changed for quiet (read every 2 s), or at
// limit: a steady-state window that starts while follow-up writes still land would count them.
func waitObjectsQuiet(t *testing.T, ns string, quiet, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	last, since := objectVersions(t, ns), time.Now()
	for time.Since(since) < quiet && time.Since(start) < limit {
		time.Sleep(2 * time.Second)
		if now := objectVersions(t, ns); !maps.Equal(now, last) {
			last, since = now, time.Now()
		}
	}
	return time.Since(start)
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// maxConcurrent reads controller-runtime's gauge of the workers the cluster controller runs.
func maxConcurrent(fams map[string]*dto.MetricFamily) float64 {
	for _, m := range fams["controller_runtime_max_concurrent_reconciles"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "controller" && strings.EqualFold(l.GetValue(), "etcdcluster") {
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}
