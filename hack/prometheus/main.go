// Command prometheus writes prometheus.yml and rules.yml for a Prometheus that runs on this host
// against the local cluster, from the monitors and rules Steward ships (config/prometheus, through
// internal/promconfig, as the Prometheus Operator would configure them): what
// `make sandbox PROMETHEUS=1` starts Prometheus on.
package main

import (
	"flag"
	"fmt"
	"os"

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
	_, err := promconfig.Write(dir, shipped, promconfig.Options{Kubeconfig: kubeconfig, TokenFile: token,
		ScrapeInterval: "15s", EvaluationInterval: "15s"}, nil)
	return err
}
