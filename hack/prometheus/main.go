// Command prometheus writes prometheus.yml and rules.yml for a Prometheus that runs on this host
// against the local cluster, from the monitors and rules Steward ships (config/prometheus, through
// internal/promconfig, as the Prometheus Operator would configure them): what
// `make sandbox PROMETHEUS=1` starts Prometheus on.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/etcd-steward/steward/internal/promconfig"
)

func main() {
	dir := flag.String("dir", "", "where to write prometheus.yml and rules.yml")
	kubeconfig := flag.String("kubeconfig", "", "the kubeconfig Prometheus discovers targets with")
	token := flag.String("token-file", "", "the scraper's ServiceAccount token (bound to steward-metrics-reader)")
	shipped := flag.String("monitoring", "config/prometheus", "the shipped monitors, rules and dashboard")
	flag.Parse()
	if err := run(*dir, *kubeconfig, *token, *shipped); err != nil {
		fmt.Fprintln(os.Stderr, "prometheus:", err)
		os.Exit(1)
	}
}

func run(dir, kubeconfig, token, shipped string) error {
	if dir == "" || kubeconfig == "" || token == "" {
		return fmt.Errorf("-dir, -kubeconfig and -token-file are required")
	}
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(shipped, name)) }
	pr, err := read("prometheusrule.yaml")
	if err != nil {
		return err
	}
	rules, err := promconfig.Rules(pr, nil)
	if err != nil {
		return err
	}
	rulesPath, err := filepath.Abs(filepath.Join(dir, "rules.yml"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(rulesPath, rules, 0o600); err != nil {
		return err
	}
	sm, err := read("servicemonitor.yaml")
	if err != nil {
		return err
	}
	pm, err := read("podmonitor.yaml")
	if err != nil {
		return err
	}
	cfg, err := promconfig.Config(promconfig.Options{Kubeconfig: kubeconfig, TokenFile: token, ScrapeInterval: "15s",
		EvaluationInterval: "15s", RuleFiles: []string{rulesPath}}, sm, pm)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "prometheus.yml"), cfg, 0o600)
}
