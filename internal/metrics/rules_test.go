package metrics

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// promtool finds the promtool hack/toolchain.sh builds: $PROMTOOL, else _out/bin/promtool.
func promtool(t *testing.T) string {
	if p := os.Getenv("PROMTOOL"); p != "" {
		return p
	}
	p := filepath.Join(repoRoot(), "_out", "bin", "promtool")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no promtool: run `make test` (hack/toolchain.sh promtool builds it) or set PROMTOOL")
	}
	return p
}

type ruleFile struct {
	Spec struct {
		Groups []struct {
			Name  string           `json:"name"`
			Rules []map[string]any `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

func alerts(t *testing.T) (spec []byte, names []string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(), "config", "prometheus", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(raw, &rf); err != nil {
		t.Fatal(err)
	}
	for _, g := range rf.Spec.Groups {
		for _, r := range g.Rules {
			if a, ok := r["alert"].(string); ok {
				names = append(names, a)
			}
		}
	}
	spec, err = yaml.Marshal(rf.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return spec, names
}

// Every alert fires when it should and not otherwise: promtool's unit tests over the rules of the
// PrometheusRule the component ships (its spec is a plain Prometheus rule file).
func TestAlertRules(t *testing.T) {
	spec, _ := alerts(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "steward.rules.yaml"), spec, 0o600); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join(repoRoot(), "config", "prometheus", "rules_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules_test.yaml"), tests, 0o600); err != nil {
		t.Fatal(err)
	}
	pt := promtool(t)
	if out, err := exec.Command(pt, "check", "rules", filepath.Join(dir, "steward.rules.yaml")).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	cmd := exec.Command(pt, "test", "rules", "rules_test.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// Each alert has a test and a runbook section, and the runbook has no section for an alert that is
// gone.
func TestEveryAlertTestedAndDocumented(t *testing.T) {
	_, names := alerts(t)
	tests, err := os.ReadFile(filepath.Join(repoRoot(), "config", "prometheus", "rules_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	book, err := os.ReadFile(filepath.Join(repoRoot(), "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)$`).FindAllStringSubmatch(string(book), -1) {
		sections[m[1]] = true
	}
	known := map[string]bool{}
	for _, a := range names {
		known[a] = true
		if !strings.Contains(string(tests), "alertname: "+a+"\n") {
			t.Errorf("alert %s has no promtool test in config/prometheus/rules_test.yaml", a)
		}
		if !sections[a] && a != "StewardEtcdDatabaseQuotaCritical" { // shares the near-quota section
			t.Errorf("alert %s has no section in docs/runbooks.md", a)
		}
	}
	for s := range sections {
		if !known[s] {
			t.Errorf("docs/runbooks.md has a section for %s, which is no alert", s)
		}
	}
}
