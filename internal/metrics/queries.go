package metrics

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

var (
	seriesName = regexp.MustCompile(`\b((?:steward|etcd|grpc|process|go|controller_runtime)_[a-zA-Z0-9_:]*|up)\b`)
	groupings  = regexp.MustCompile(`\b(?:by|on|without|ignoring)\s*\([^)]*\)`)
	labelMatch = regexp.MustCompile(`\b[a-zA-Z_][a-zA-Z0-9_]*\s*(?:=~|!~|!=|=)`)
)

// QueriedSeries returns the series the optional monitoring component queries, each with where: the
// dashboard's panels and variables (config/prometheus/dashboard.json) and the alert rules
// (prometheusrule.yaml), under the repository root. Tests hold them to what is really exported (the
// catalog and a real etcd in unit tests, a live scrape in e2e), so neither side can drift.
func QueriedSeries(root string) (map[string][]string, error) {
	out := map[string][]string{}
	add := func(where, expr string) {
		expr = labelMatch.ReplaceAllString(groupings.ReplaceAllString(expr, ""), "")
		for _, m := range seriesName.FindAllString(expr, -1) {
			out[m] = append(out[m], where)
		}
	}
	dash, err := ReadDashboard(root)
	if err != nil {
		return nil, err
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
	raw, err := os.ReadFile(filepath.Join(root, "config", "prometheus", "prometheusrule.yaml"))
	if err != nil {
		return nil, err
	}
	var rules struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert string `json:"alert"`
					Expr  string `json:"expr"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		return nil, fmt.Errorf("prometheusrule.yaml: %w", err)
	}
	for _, g := range rules.Spec.Groups {
		for _, r := range g.Rules {
			add("alert "+r.Alert, r.Expr)
		}
	}
	return out, nil
}

// BaseSeries is a histogram or summary series' family name (without _bucket, _sum, _count).
func BaseSeries(name string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		name = strings.TrimSuffix(name, suffix)
	}
	return name
}

// Dashboard is what the shipped Grafana dashboard queries: its panels' and its variables'.
type Dashboard struct {
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

// ReadDashboard reads config/prometheus/dashboard.json under the repository root.
func ReadDashboard(root string) (*Dashboard, error) {
	raw, err := os.ReadFile(filepath.Join(root, "config", "prometheus", "dashboard.json"))
	if err != nil {
		return nil, err
	}
	var d Dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("dashboard.json: %w", err)
	}
	return &d, nil
}
