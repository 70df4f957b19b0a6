//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-steward/steward/internal/metrics"
)

// TestOperatorMetricsSecure (issue 14, item 2): the operator's metrics Service serves HTTPS to
// callers whose token may get /metrics (ClusterRole steward-metrics-reader), and nobody else; the
// steward_ metrics of a settled cluster are there.
func TestOperatorMetricsSecure(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "mx", 1, "")
	ctx := context.Background()
	sc := newScraper(t, ns)
	// Retried only while the operator does not answer: a scenario beside this one may have just
	// killed it. A wrong answer fails after the wait.
	f.WaitFor(t, ns, "a scrape without a token refused", time.Minute, func(ctx context.Context) (bool, error) {
		code, _, err := sc.get(ctx, false)
		if err != nil {
			return false, err
		}
		if code != http.StatusUnauthorized {
			return false, fmt.Errorf("without a token: HTTP %d, want 401", code)
		}
		return true, nil
	})
	want := []string{
		fmt.Sprintf(`steward_cluster_quorum_healthy{cluster="mx",namespace="%s"} 1`, ns),
		fmt.Sprintf(`steward_cluster_members{cluster="mx",namespace="%s",ready="true",role="leader"} 1`, ns),
		fmt.Sprintf(`steward_cluster_leader{cluster="mx",member="mx-0",namespace="%s"} 1`, ns),
		fmt.Sprintf(`steward_rollout_pending_members{cluster="mx",namespace="%s"} 0`, ns),
	}
	var body string
	f.WaitFor(t, ns, "the cluster's metrics served to the scraper", time.Minute, func(ctx context.Context) (bool, error) {
		code, b, err := sc.get(ctx, true)
		if err != nil {
			return false, err
		}
		body = b
		for _, w := range want {
			if !strings.Contains(b, w) {
				return false, fmt.Errorf("HTTP %d, no %s", code, w)
			}
		}
		return code == http.StatusOK, nil
	})
	// The text parses (a scraper would refuse it otherwise), and the CA's expiry is the live one.
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing the operator's metrics: %v", err)
	}
	ec, _ := get(ctx, ns, "mx")
	if mf := families["steward_ca_expiry_timestamp_seconds"]; ec.Status.TLS != nil && ec.Status.TLS.CANotAfter != nil {
		found := false
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "namespace" && l.GetValue() == ns {
					found = int64(m.GetGauge().GetValue()) == ec.Status.TLS.CANotAfter.Unix()
				}
			}
		}
		if !found {
			t.Errorf("steward_ca_expiry_timestamp_seconds does not say the CA's notAfter %v", ec.Status.TLS.CANotAfter)
		}
	}

	// The operator's Go heap is bounded below its container's memory limit (90 %), so it collects
	// before the limit is reached instead of being OOM-killed.
	var d appsv1.Deployment
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: f.OperatorNamespace, Name: f.OperatorDeployment}, &d); err != nil {
		t.Fatal(err)
	}
	if limit := d.Spec.Template.Spec.Containers[0].Resources.Limits.Memory(); limit.IsZero() {
		t.Errorf("the operator's Deployment sets no memory limit")
	} else if mf := families["go_gc_gomemlimit_bytes"]; mf == nil || len(mf.GetMetric()) != 1 ||
		int64(mf.GetMetric()[0].GetGauge().GetValue()) != int64(float64(limit.Value())*0.9) {
		t.Errorf("GOMEMLIMIT %v, want 90 %% of the container's limit %s", mf.GetMetric(), limit)
	}
	// It collects at half the live heap's growth, not at its doubling: 6.4 MiB less working set at
	// 100 clusters (issue 30).
	if mf := families["go_gc_gogc_percent"]; mf == nil || len(mf.GetMetric()) != 1 || mf.GetMetric()[0].GetGauge().GetValue() != 50 {
		t.Errorf("GOGC %v, want 50", mf.GetMetric())
	}

	// Each member's own metrics: plain HTTP on its metrics port, no client certificate.
	pod := memberPods(t, ns, "mx")["mx-0"]
	resp, err := http.Get("http://" + net.JoinHostPort(pod.Status.PodIP, "2381") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	member, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(member), "etcd_server_has_leader 1") {
		t.Errorf("member metrics: HTTP %d, %d bytes, want etcd_server_has_leader 1", resp.StatusCode, len(member))
	}
	memberParser := expfmt.NewTextParser(model.UTF8Validation)
	memberFamilies, err := memberParser.TextToMetricFamilies(strings.NewReader(string(member)))
	if err != nil {
		t.Fatalf("parsing the member's metrics: %v", err)
	}

	// Every series the dashboard and the alerts query is exported by what runs here: etcd's and
	// controller-runtime's series found in the live scrapes; Steward's own in its catalog (a gauge
	// without series yet, such as an alarm, is absent from a scrape), and nothing Steward exports
	// is missing from the catalog (docs/metrics.md is generated from it).
	queried, err := metrics.QueriedSeries(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	catalog := map[string]bool{}
	for _, d := range metrics.Catalog {
		catalog[d.Name] = true
	}
	for name, where := range queried {
		base := metrics.BaseSeries(name)
		switch {
		case name == "up": // Prometheus's own
		case strings.HasPrefix(name, "steward_"):
			if !catalog[name] {
				t.Errorf("%s (queried by %s) is not in Steward's catalog", name, where[0])
			}
		case families[name] == nil && families[base] == nil && memberFamilies[name] == nil && memberFamilies[base] == nil:
			t.Errorf("%s (queried by %s) is exported by neither the operator nor a member", name, where[0])
		}
	}
	for name := range families {
		if strings.HasPrefix(name, "steward_") && !catalog[name] {
			t.Errorf("the operator exports %s, which its catalog (and docs/metrics.md) lacks", name)
		}
	}
}

// The optional monitoring component needs the Prometheus Operator's CRDs (this cluster has none):
// applying it fails with kubectl's message naming the missing kind, and nothing of the base install
// depends on it (every other scenario runs without it).
func TestPrometheusComponentWithoutCRDs(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "config", "prometheus")
	for _, f0 := range []string{"servicemonitor.yaml", "podmonitor.yaml", "prometheusrule.yaml"} {
		_, err := f.Kubectl(ctx, "apply", "--dry-run=server", "-f", filepath.Join(dir, f0))
		if err == nil || !strings.Contains(err.Error(), "ensure CRDs are installed first") {
			t.Errorf("%s applied without the Prometheus Operator's CRDs: %v", f0, err)
		}
	}
}
