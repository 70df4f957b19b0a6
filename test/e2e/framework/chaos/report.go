package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// StepRecord is what happened in one step.
type StepRecord struct {
	Step
	Started   time.Time `json:"started"`
	Injected  bool      `json:"injected"`         // the fault happened (a failpoint may not be reached)
	Note      string    `json:"note,omitempty"`   // what the injector did or why it did not
	Converged float64   `json:"convergedSeconds"` // from the operation to settled, faults lifted
	Error     string    `json:"error,omitempty"`  // the step could not be carried out
}

// Report is one seed's run.
type Report struct {
	Seed         uint64         `json:"seed"`
	Cluster      string         `json:"cluster"`
	Started      time.Time      `json:"started"`
	Duration     float64        `json:"durationSeconds"`
	Steps        []StepRecord   `json:"steps"`
	Operations   map[string]int `json:"operations"`
	Faults       map[string]int `json:"faultsInjected"`
	Requests     int            `json:"requests"`
	Acknowledged int            `json:"acknowledgedWrites"`
	Failed       int            `json:"failedRequests"`
	Lost         int            `json:"lostWrites"`
	Linearizable string         `json:"linearizability"`
	Violations   []Violation    `json:"violations"`
}

// Count fills the per-kind totals from the steps.
func (r *Report) Count() {
	r.Operations, r.Faults = map[string]int{}, map[string]int{}
	for _, s := range r.Steps {
		r.Operations[string(s.Op)]++
		if s.Injected && s.Fault != FaultNone {
			r.Faults[string(s.Fault)]++
		}
	}
}

// Markdown is the short summary a person reads first.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Fault campaign, seed %d\n\n", r.Seed)
	fmt.Fprintf(&b, "Cluster %s, started %s, ran %.0f s, %d steps. Replay: `make chaos SEED=%d`.\n\n",
		r.Cluster, r.Started.UTC().Format(time.RFC3339), r.Duration, len(r.Steps), r.Seed)
	fmt.Fprintf(&b, "| operations | faults injected |\n|---|---|\n| %s | %s |\n\n", counts(r.Operations), counts(r.Faults))
	fmt.Fprintf(&b, "Traffic: %d requests, %d acknowledged writes, %d failed, %d lost. Linearizability: %s.\n\n",
		r.Requests, r.Acknowledged, r.Failed, r.Lost, r.Linearizable)
	if len(r.Violations) == 0 {
		b.WriteString("Invariant violations: 0.\n\n")
	} else {
		fmt.Fprintf(&b, "Invariant violations: %d.\n\n", len(r.Violations))
		for _, v := range r.Violations {
			fmt.Fprintf(&b, "- %s %s: %s\n", v.At.UTC().Format("15:04:05.000"), v.Invariant, v.Detail)
		}
		b.WriteString("\n")
	}
	b.WriteString("| step | operation | fault | injected | converged (s) | note |\n|---|---|---|---|---|---|\n")
	for _, s := range r.Steps {
		fault := string(s.Fault)
		if s.Failpoint != "" {
			fault += " " + s.Failpoint
		} else if s.Fault.MemberFault() {
			fault += fmt.Sprintf(" member %d", s.Member)
		}
		note := s.Note
		if s.Error != "" {
			note = "ERROR: " + s.Error
		}
		fmt.Fprintf(&b, "| %d | %s → %d | %s after %.1fs | %v | %.1f | %s |\n", s.N, s.Op, s.Replicas, fault,
			s.FaultAfter.Seconds(), s.Injected, s.Converged, strings.ReplaceAll(note, "|", "/"))
	}
	return b.String()
}

func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// Write saves dir/seed-N.json and dir/seed-N.md.
func (r *Report) Write(dir string) (jsonPath, mdPath string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", "", err
	}
	base := filepath.Join(dir, fmt.Sprintf("seed-%d", r.Seed))
	if err := os.WriteFile(base+".json", data, 0o644); err != nil {
		return "", "", err
	}
	return base + ".json", base + ".md", os.WriteFile(base+".md", []byte(r.Markdown()), 0o644)
}
