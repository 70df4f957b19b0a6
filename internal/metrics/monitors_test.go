package metrics

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/etcd-steward/steward/internal/promconfig"
)

// TestShippedMonitorsLoadInPrometheus: the Prometheus configuration the shipped ServiceMonitor and
// PodMonitor translate to, with the PrometheusRule's groups as its rule file, is one Prometheus
// accepts (promtool check config also parses every rule file it names). test/e2e TestPrometheus
// runs a Prometheus on the same configuration against live clusters.
func TestShippedMonitorsLoadInPrometheus(t *testing.T) {
	dir := t.TempDir()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(repoRoot(), "config", "prometheus", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rules, err := promconfig.Rules(read("prometheusrule.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := promconfig.Config(promconfig.Options{
		Kubeconfig: write("kubeconfig", []byte("apiVersion: v1\nkind: Config\n")), TokenFile: write("token", []byte("t")),
		RuleFiles: []string{write("rules.yml", rules)}, ScrapeInterval: "5s", EvaluationInterval: "5s",
	}, read("servicemonitor.yaml"), read("podmonitor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool(t), "check", "config", write("prometheus.yml", cfg)).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check config: %v\n%s\n%s", err, out, cfg)
	}
	t.Logf("%s", out)
}
