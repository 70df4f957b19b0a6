// Package promconfig turns the monitoring objects Steward ships (config/prometheus: a
// ServiceMonitor for the operator, a PodMonitor for the members, a PrometheusRule) into the
// configuration a plain Prometheus reads, the way the Prometheus Operator would: the same
// Kubernetes service discovery, the same target labels (namespace, service, pod, container,
// endpoint, job), honorLabels, then the monitor's own relabelings. The e2e runs a real Prometheus
// on it (test/e2e TestPrometheus), and `make sandbox PROMETHEUS=1` too, so what is shown working is
// what the shipped monitors configure, not a hand-written stand-in.
//
// Only the monitor fields Steward's monitors use are translated; any other field is refused by
// name rather than silently dropped.
package promconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Options are what the Prometheus process needs beyond the monitors.
type Options struct {
	// Kubeconfig is the kubeconfig service discovery uses (Prometheus runs outside the cluster).
	Kubeconfig string
	// TokenFile stands for a monitor's bearerTokenFile, a path inside a Prometheus Pod.
	TokenFile string
	// Namespaces limits discovery of monitors that select any namespace (none: all namespaces).
	Namespaces []string
	// ScrapeInterval and EvaluationInterval, as Prometheus durations ("5s"); Prometheus's default
	// (1m) when empty.
	ScrapeInterval, EvaluationInterval string
	// RuleFiles are loaded by the config.
	RuleFiles []string
}

// monitor is the part of a ServiceMonitor or PodMonitor this package reads. Unknown fields make
// parsing fail (yaml.UnmarshalStrict), so nothing the Prometheus Operator would honour is lost.
type monitor struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels,omitempty"`
	} `json:"metadata"`
	Spec struct {
		Selector          selector `json:"selector"`
		NamespaceSelector *struct {
			Any        bool     `json:"any,omitempty"`
			MatchNames []string `json:"matchNames,omitempty"`
		} `json:"namespaceSelector,omitempty"`
		Endpoints           []endpoint `json:"endpoints,omitempty"`
		PodMetricsEndpoints []endpoint `json:"podMetricsEndpoints,omitempty"`
	} `json:"spec"`
}

type selector struct {
	MatchLabels      map[string]string `json:"matchLabels,omitempty"`
	MatchExpressions []struct {
		Key      string   `json:"key"`
		Operator string   `json:"operator"`
		Values   []string `json:"values,omitempty"`
	} `json:"matchExpressions,omitempty"`
}

type endpoint struct {
	Port            string `json:"port"`
	Path            string `json:"path,omitempty"`
	Scheme          string `json:"scheme,omitempty"`
	HonorLabels     bool   `json:"honorLabels,omitempty"`
	BearerTokenFile string `json:"bearerTokenFile,omitempty"`
	TLSConfig       *struct {
		InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
	} `json:"tlsConfig,omitempty"`
	Relabelings []relabeling `json:"relabelings,omitempty"`
}

type relabeling struct {
	SourceLabels []string `json:"sourceLabels,omitempty"`
	Separator    string   `json:"separator,omitempty"`
	TargetLabel  string   `json:"targetLabel,omitempty"`
	Regex        string   `json:"regex,omitempty"`
	Replacement  *string  `json:"replacement,omitempty"`
	Action       string   `json:"action,omitempty"`
}

// Config is prometheus.yml for the monitors (ServiceMonitor and PodMonitor documents).
func Config(o Options, monitors ...[]byte) ([]byte, error) {
	var jobs []any
	for _, doc := range monitors {
		var m monitor
		if err := yaml.UnmarshalStrict(doc, &m); err != nil {
			return nil, fmt.Errorf("a monitor: %w", err)
		}
		js, err := scrapeConfigs(o, &m)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", m.Kind, m.Metadata.Name, err)
		}
		jobs = append(jobs, js...)
	}
	global := map[string]any{}
	if o.ScrapeInterval != "" {
		global["scrape_interval"] = o.ScrapeInterval
	}
	if o.EvaluationInterval != "" {
		global["evaluation_interval"] = o.EvaluationInterval
	}
	cfg := map[string]any{"global": global, "scrape_configs": jobs}
	if len(o.RuleFiles) > 0 {
		cfg["rule_files"] = o.RuleFiles
	}
	return yaml.Marshal(cfg)
}

func scrapeConfigs(o Options, m *monitor) ([]any, error) {
	role, eps, kind := "", m.Spec.Endpoints, ""
	switch m.Kind {
	case "ServiceMonitor":
		role, kind = "endpoints", "service"
	case "PodMonitor":
		role, kind, eps = "pod", "pod", m.Spec.PodMetricsEndpoints
	default:
		return nil, fmt.Errorf("kind %q is not a monitor", m.Kind)
	}
	namespaces := []string{m.Metadata.Namespace}
	if ns := m.Spec.NamespaceSelector; ns != nil {
		switch {
		case ns.Any:
			namespaces = o.Namespaces
		case len(ns.MatchNames) > 0:
			namespaces = ns.MatchNames
		}
	}
	sd := map[string]any{"role": role}
	if o.Kubeconfig != "" {
		sd["kubeconfig_file"] = o.Kubeconfig
	}
	if len(namespaces) > 0 {
		sd["namespaces"] = map[string]any{"names": namespaces}
	}
	keep, err := selectorRelabelings(kind, m.Spec.Selector)
	if err != nil {
		return nil, err
	}
	var out []any
	for i, ep := range eps {
		job := map[string]any{
			"job_name":              fmt.Sprintf("%s/%s/%s/%d", strings.ToLower(m.Kind[:1])+m.Kind[1:], m.Metadata.Namespace, m.Metadata.Name, i),
			"kubernetes_sd_configs": []any{sd},
			"honor_labels":          ep.HonorLabels,
			"metrics_path":          or(ep.Path, "/metrics"),
			"scheme":                or(ep.Scheme, "http"),
		}
		if ep.BearerTokenFile != "" {
			if o.TokenFile == "" {
				return nil, fmt.Errorf("endpoint %s reads a bearer token: Options.TokenFile is empty", ep.Port)
			}
			job["authorization"] = map[string]any{"type": "Bearer", "credentials_file": o.TokenFile}
		}
		if ep.TLSConfig != nil {
			job["tls_config"] = map[string]any{"insecure_skip_verify": ep.TLSConfig.InsecureSkipVerify}
		}
		rl := append([]any{}, keep...)
		rl = append(rl, targetLabels(m, kind, ep.Port)...)
		for _, r := range ep.Relabelings {
			rl = append(rl, relabelConfig(r))
		}
		job["relabel_configs"] = rl
		out = append(out, job)
	}
	return out, nil
}

// selectorRelabelings keep the targets whose Service (ServiceMonitor) or Pod (PodMonitor) the
// monitor's selector matches.
func selectorRelabelings(kind string, s selector) ([]any, error) {
	var out []any
	keys := make([]string, 0, len(s.MatchLabels))
	for k := range s.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, map[string]any{"action": "keep",
			"source_labels": []string{"__meta_kubernetes_" + kind + "_label_" + sanitize(k)}, "regex": regexp.QuoteMeta(s.MatchLabels[k])})
	}
	for _, e := range s.MatchExpressions {
		switch e.Operator {
		case "Exists":
			out = append(out, map[string]any{"action": "keep",
				"source_labels": []string{"__meta_kubernetes_" + kind + "_labelpresent_" + sanitize(e.Key)}, "regex": "true"})
		case "In":
			quoted := make([]string, len(e.Values))
			for i, v := range e.Values {
				quoted[i] = regexp.QuoteMeta(v)
			}
			out = append(out, map[string]any{"action": "keep",
				"source_labels": []string{"__meta_kubernetes_" + kind + "_label_" + sanitize(e.Key)}, "regex": strings.Join(quoted, "|")})
		default:
			return nil, fmt.Errorf("selector operator %q is not translated", e.Operator)
		}
	}
	return out, nil
}

// targetLabels are the labels the Prometheus Operator gives every target: the port kept, then
// namespace, service (ServiceMonitor), pod, container, job and endpoint.
func targetLabels(m *monitor, kind, port string) []any {
	set := func(source, target string) any {
		return map[string]any{"source_labels": []string{source}, "target_label": target}
	}
	portLabel := "__meta_kubernetes_endpoint_port_name"
	if kind == "pod" {
		portLabel = "__meta_kubernetes_pod_container_port_name"
	}
	out := []any{
		map[string]any{"action": "keep", "source_labels": []string{portLabel}, "regex": regexp.QuoteMeta(port)},
		set("__meta_kubernetes_namespace", "namespace"),
	}
	if kind == "service" {
		out = append(out, set("__meta_kubernetes_service_name", "service"))
	}
	out = append(out, set("__meta_kubernetes_pod_name", "pod"), set("__meta_kubernetes_pod_container_name", "container"))
	if kind == "service" {
		out = append(out, set("__meta_kubernetes_service_name", "job"))
	} else {
		out = append(out, map[string]any{"target_label": "job", "replacement": m.Metadata.Namespace + "/" + m.Metadata.Name})
	}
	return append(out, map[string]any{"target_label": "endpoint", "replacement": port})
}

func relabelConfig(r relabeling) any {
	out := map[string]any{}
	if len(r.SourceLabels) > 0 {
		out["source_labels"] = r.SourceLabels
	}
	for k, v := range map[string]string{"separator": r.Separator, "target_label": r.TargetLabel, "regex": r.Regex, "action": strings.ToLower(r.Action)} {
		if v != "" {
			out[k] = v
		}
	}
	if r.Replacement != nil {
		out["replacement"] = *r.Replacement
	}
	return out
}

var unsafe = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// sanitize is how Kubernetes service discovery names a label in its meta labels.
func sanitize(s string) string { return unsafe.ReplaceAllString(s, "_") }

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Rules is a Prometheus rule file holding a PrometheusRule's groups. edit, when not nil, may
// change each alerting rule (its "alert", "expr", "for", ... keys) before it is written.
func Rules(prometheusRule []byte, edit func(rule map[string]any)) ([]byte, error) {
	var pr struct {
		Kind string `json:"kind"`
		Spec struct {
			Groups []map[string]any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(prometheusRule, &pr); err != nil {
		return nil, err
	}
	if pr.Kind != "PrometheusRule" || len(pr.Spec.Groups) == 0 {
		return nil, fmt.Errorf("not a PrometheusRule with groups (kind %q)", pr.Kind)
	}
	if edit != nil {
		for _, g := range pr.Spec.Groups {
			rules, _ := g["rules"].([]any)
			for _, r := range rules {
				if rule, ok := r.(map[string]any); ok && rule["alert"] != nil {
					edit(rule)
				}
			}
		}
	}
	return yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
}

// Write writes rules.yml (the PrometheusRule's groups, edited by edit when not nil) and
// prometheus.yml (the ServiceMonitor's and PodMonitor's scrape configs, loading rules.yml) into dir,
// from the shipped files in monitoring (config/prometheus), and returns prometheus.yml's path.
func Write(dir, monitoring string, o Options, edit func(rule map[string]any)) (string, error) {
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(monitoring, name)) }
	pr, err := read("prometheusrule.yaml")
	if err != nil {
		return "", err
	}
	rules, err := Rules(pr, edit)
	if err != nil {
		return "", err
	}
	rulesPath, err := filepath.Abs(filepath.Join(dir, "rules.yml"))
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(rulesPath, rules, 0o600); err != nil {
		return "", err
	}
	var monitors [][]byte
	for _, name := range []string{"servicemonitor.yaml", "podmonitor.yaml"} {
		b, err := read(name)
		if err != nil {
			return "", err
		}
		monitors = append(monitors, b)
	}
	o.RuleFiles = append(o.RuleFiles, rulesPath)
	cfg, err := Config(o, monitors...)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "prometheus.yml")
	return path, os.WriteFile(path, cfg, 0o600)
}
