package promconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func shipped(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "prometheus", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jobs parses a generated config back into its scrape configs, by job name prefix.
func jobs(t *testing.T, cfg []byte) map[string]map[string]any {
	t.Helper()
	var c struct {
		ScrapeConfigs []map[string]any `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal(cfg, &c); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, j := range c.ScrapeConfigs {
		name, _ := j["job_name"].(string)
		out[strings.SplitN(name, "/", 2)[0]] = j
	}
	return out
}

// TestShippedMonitors: the operator's ServiceMonitor and the members' PodMonitor become the scrape
// configs the Prometheus Operator would generate.
func TestShippedMonitors(t *testing.T) {
	cfg, err := Config(Options{Kubeconfig: "/k", TokenFile: "/token", Namespaces: []string{"db"}, ScrapeInterval: "2s"},
		shipped(t, "servicemonitor.yaml"), shipped(t, "podmonitor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	j := jobs(t, cfg)
	op, members := j["serviceMonitor"], j["podMonitor"]
	if op == nil || members == nil {
		t.Fatalf("jobs %v, want the ServiceMonitor's and the PodMonitor's\n%s", j, cfg)
	}
	text := string(cfg)
	for _, want := range []string{
		"credentials_file: /token", "insecure_skip_verify: true", "scheme: https",
		// The operator's own series carry namespace (the EtcdCluster's): honorLabels keeps it from
		// becoming exported_namespace under the target's namespace, steward-system.
		"honor_labels: true",
		"__meta_kubernetes_service_label_app_kubernetes_io_component", "__meta_kubernetes_pod_labelpresent_etcd_steward_dev_cluster",
		"__meta_kubernetes_pod_container_port_name", "target_label: member", "target_label: cluster", "kubeconfig_file: /k",
		"scrape_interval: 2s",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the config lacks %q:\n%s", want, text)
		}
	}
	if op["honor_labels"] != true {
		t.Errorf("the operator's job does not honour its series' labels: %v", op["honor_labels"])
	}
	sd := func(j map[string]any) string {
		b, _ := yaml.Marshal(j["kubernetes_sd_configs"])
		return string(b)
	}
	if !strings.Contains(sd(op), "steward-system") || !strings.Contains(sd(members), "- db") {
		t.Errorf("discovery: operator %s members %s; want the monitor's namespace, and the given namespaces for any", sd(op), sd(members))
	}
}

func TestRefusesWhatItDoesNotTranslate(t *testing.T) {
	for name, doc := range map[string]string{
		"an unknown endpoint field": "kind: PodMonitor\nmetadata: {name: m, namespace: n}\nspec:\n  podMetricsEndpoints:\n  - port: metrics\n    interval: 5s\n",
		"a NotIn selector": "kind: PodMonitor\nmetadata: {name: m, namespace: n}\nspec:\n  selector:\n    matchExpressions:\n    - {key: a, operator: NotIn, values: [b]}\n" +
			"  podMetricsEndpoints:\n  - port: metrics\n",
		"not a monitor":          "kind: Service\nmetadata: {name: m, namespace: n}\nspec: {}\n",
		"a token without a file": "kind: ServiceMonitor\nmetadata: {name: m, namespace: n}\nspec:\n  endpoints:\n  - port: https\n    bearerTokenFile: /t\n",
	} {
		t.Run(name, func(t *testing.T) {
			if cfg, err := Config(Options{}, []byte(doc)); err == nil {
				t.Errorf("Config accepted it:\n%s", cfg)
			}
		})
	}
}

func TestRules(t *testing.T) {
	b, err := Rules(shipped(t, "prometheusrule.yaml"), func(r map[string]any) {
		if r["for"] != nil {
			r["for"] = "0s"
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if !strings.HasPrefix(text, "groups:") || !strings.Contains(text, "alert: StewardEtcdQuorumAtRisk") ||
		strings.Contains(text, "for: 5m") || !strings.Contains(text, "for: 0s") {
		t.Errorf("rule file:\n%s", text)
	}
	if _, err := Rules(shipped(t, "podmonitor.yaml"), nil); err == nil {
		t.Error("a PodMonitor was taken for a PrometheusRule")
	}
}
