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
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg, err := promconfig.Write(dir, filepath.Join(repoRoot(), "config", "prometheus"), promconfig.Options{
		Kubeconfig: write("kubeconfig", []byte("apiVersion: v1\nkind: Config\n")), TokenFile: write("token", []byte("t")),
		ScrapeInterval: "5s", EvaluationInterval: "5s",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool(t), "check", "config", cfg).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
