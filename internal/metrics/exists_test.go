package metrics

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/etcd-steward/steward/internal/etcdtest"
)

// notOurs are series queried that neither Steward nor etcd export: Prometheus's own target health,
// and controller-runtime's reconcile counters (registered with the operator's controller).
var notOurs = map[string]bool{"up": true, "controller_runtime_reconcile_errors_total": true}

var seriesName = regexp.MustCompile(`\b((?:steward|etcd|grpc|process|go|controller_runtime)_[a-zA-Z0-9_:]*|up)\b`)

// queried collects the series names the dashboard's panels and the alert rules query.
func queried(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	groups := regexp.MustCompile(`\b(?:by|on|without|ignoring)\s*\([^)]*\)`)
	labelMatch := regexp.MustCompile(`\b[a-zA-Z_][a-zA-Z0-9_]*\s*(?:=~|!~|!=|=)`)
	add := func(where, expr string) {
		expr = labelMatch.ReplaceAllString(groups.ReplaceAllString(expr, ""), "")
		for _, m := range seriesName.FindAllString(expr, -1) {
			out[m] = append(out[m], where)
		}
	}
	raw, err := os.ReadFile(filepath.Join(repoRoot(), "config", "prometheus", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Query any `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			add("dashboard panel "+p.Title, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok {
			add("dashboard variable", q)
		}
	}
	spec, _ := alerts(t)
	for _, line := range strings.Split(string(spec), "\n") {
		if strings.Contains(line, "expr:") || strings.HasPrefix(strings.TrimSpace(line), "(") || strings.Contains(line, "and ") {
			add("alert rules", line)
		}
	}
	return out
}

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
	q := queried(t)
	if len(q) < 10 {
		t.Fatalf("found only %d series in the dashboard and rules: the extraction is broken", len(q))
	}
	for name, where := range q {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			base = strings.TrimSuffix(base, suffix)
		}
		if !exported[name] && !exported[base] && !notOurs[name] {
			t.Errorf("%s (queried by %s) is exported by neither Steward nor etcd", name, where[0])
		}
	}
}
