// Command metricsdoc writes docs/metrics.md from Steward's metric catalog (internal/metrics).
package main

import (
	"fmt"
	"os"

	"github.com/etcd-steward/steward/internal/metrics"
)

func main() {
	if err := metrics.WriteDoc(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "metricsdoc:", err)
		os.Exit(1)
	}
}
