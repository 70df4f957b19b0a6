package metrics

import (
	"net/http"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/etcd-steward/steward/internal/etcdtest"
)

// notOurs are series queried that neither Steward nor etcd export: Prometheus's own target health,
// and controller-runtime's reconcile counters (registered with the operator's controller).
var notOurs = map[string]bool{"up": true, "controller_runtime_reconcile_errors_total": true}

// Every series the dashboard and the alerts query exists in what is really exported: Steward's
// catalog, and the /metrics of a real etcd member (its plain-HTTP metrics listener, no client
// certificate), so neither can drift from the code or from etcd.
func TestDashboardAndAlertsQueryExportedSeries(t *testing.T) {
	c := etcdtest.Start(t, 1)
	resp, err := http.Get(c.Members[0].Metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing etcd's metrics: %v", err)
	}
	exported := map[string]bool{}
	for name := range families {
		exported[name] = true
	}
	for _, d := range Catalog {
		exported[d.Name] = true
	}
	q, err := QueriedSeries(repoRoot())
	if err != nil {
		t.Fatal(err)
	}
	if len(q) < 10 {
		t.Fatalf("found only %d series in the dashboard and rules: the extraction is broken", len(q))
	}
	for name, where := range q {
		if !exported[name] && !exported[BaseSeries(name)] && !notOurs[name] {
			t.Errorf("%s (queried by %s) is exported by neither Steward nor etcd", name, where[0])
		}
	}
}
