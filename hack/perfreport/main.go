// Command perfreport turns the MEASURE lines of an e2e log (hack/perf-report.sh runs the scenarios)
// into docs/performance.md: Steward's rolls side by side with a plain StatefulSet's rolling restart
// of the same etcd, then Steward's other figures. The page is regenerated, never edited by hand.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// roll is what one roll scenario measured.
type roll struct {
	total, leaders, restarts, unavailable, failed, requests, latency, gap string
	breakdown                                                             []string
}

var (
	measure   = regexp.MustCompile(`MEASURE (.+)$`)
	rollLine  = regexp.MustCompile(`^(.+): roll ([0-9.]+s); leaders \[([^\]]*)\]`)
	restarts  = regexp.MustCompile(`^(.+): (\d+) member restarts, longest unavailable ([0-9.]+s)$`)
	during    = regexp.MustCompile(`^(.+) during roll: (\d+) requests, \d+ acknowledged writes, (\d+) failed (\[.*\]); latency p50=([0-9.]+)(ms|µs|s) p90=[0-9.]+(?:ms|µs|s) p99=([0-9.]+)(ms|µs|s) max=([0-9.]+)(ms|µs|s); longest gap without success ([0-9.]+(?:ms|µs|s))`)
	plainTime = regexp.MustCompile(`^(.+): ([0-9.]+s)$`)
	// atScale is the scale benchmark's summary (TestBenchScale): "operator at N clusters: a; b; c".
	atScale = regexp.MustCompile(`^operator at (\d+) clusters: (.+)$`)
)

// scale is what the scale benchmark measured: how many clusters, and its figures in order.
type scale struct {
	clusters string
	figures  []string
}

// The side-by-side rows, in order: the baseline first.
var sideBySide = []struct{ label, what, short string }{
	{"statefulset rolling restart 3-pvc", "plain StatefulSet, rolling restart (template change)", "StatefulSet"},
	{"options roll 3-pvc", "Steward, option change (Pods rebuilt)", "options"},
	{"version 3.5.35 -> 3.6.16", "Steward, version 3.5 → 3.6 (Pods rebuilt: flags and probes change)", "3.5 → 3.6"},
	{"version 3.6.16 -> 3.7.3", "Steward, version 3.6 → 3.7 (containers restarted in place)", "3.6 → 3.7"},
	{"resize in place 3-pvc", "Steward, CPU and memory change (resized in place)", "resize"},
}

// Usage: perfreport [-chart FILE] <e2e.log >performance.md. With -chart, each member's
// unavailability per roll kind is drawn into FILE (SVG) and the page shows it under that name.
func main() {
	chartFile := flag.String("chart", "", "write the unavailability chart (SVG) here; the page links it by its base name")
	flag.Parse()
	rolls, other, order, sc, err := parse(os.Stdin)
	if err != nil {
		fail(err)
	}
	link := ""
	if *chartFile != "" {
		f, err := os.Create(*chartFile)
		if err != nil {
			fail(err)
		}
		if err := errors.Join(chart(f, rolls), f.Close()); err != nil {
			fail(err)
		}
		link = filepath.Base(*chartFile)
	}
	write(os.Stdout, rolls, other, order, sc, link)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "perfreport:", err)
	os.Exit(1)
}

func parse(r io.Reader) (map[string]*roll, map[string]string, []string, *scale, error) {
	var sc *scale
	rolls := map[string]*roll{}
	other := map[string]string{}
	var order []string
	get := func(l string) *roll {
		if rolls[l] == nil {
			rolls[l] = &roll{}
		}
		return rolls[l]
	}
	var open *roll // collecting a restart breakdown
	lines := bufio.NewScanner(r)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	for lines.Scan() {
		line := lines.Text()
		m := measure.FindStringSubmatch(line)
		if m == nil {
			if open != nil && strings.HasPrefix(line, "        ") && strings.TrimSpace(line) != "" {
				open.breakdown = append(open.breakdown, strings.TrimSpace(line))
				continue
			}
			open = nil
			continue
		}
		open = nil
		text := m[1]
		switch {
		case rollLine.MatchString(text):
			g := rollLine.FindStringSubmatch(text)
			r := get(g[1])
			r.total = g[2]
			r.leaders = fmt.Sprint(max(len(strings.Fields(g[3]))-1, 0))
		case restarts.MatchString(text):
			g := restarts.FindStringSubmatch(text)
			r := get(g[1])
			r.restarts, r.unavailable = g[2], g[3]
			open = r
		case during.MatchString(text):
			g := during.FindStringSubmatch(text)
			r := get(g[1])
			r.requests, r.failed = g[2], g[3]
			if g[3] != "0" {
				r.failed += " " + g[4]
			}
			r.latency = fmt.Sprintf("%s / %s / %s", ms(g[5], g[6]), ms(g[7], g[8]), ms(g[9], g[10]))
			r.gap = g[11]
		case atScale.MatchString(text):
			g := atScale.FindStringSubmatch(text)
			sc = &scale{clusters: g[1], figures: strings.Split(g[2], "; ")}
		case strings.Contains(text, " steady: "):
		case plainTime.MatchString(text):
			g := plainTime.FindStringSubmatch(text)
			if _, seen := other[g[1]]; !seen {
				order = append(order, g[1])
			}
			other[g[1]] = g[2]
		}
	}
	return rolls, other, order, sc, lines.Err()
}

func ms(v, unit string) string {
	d, err := time.ParseDuration(v + unit)
	if err != nil {
		return v + unit
	}
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

func write(w io.Writer, rolls map[string]*roll, other map[string]string, order []string, sc *scale, chartLink string) {
	p := func(format string, a ...any) { _, _ = fmt.Fprintf(w, format, a...) }
	p("# Performance\n\n")
	p("Generated by `hack/perf-report.sh` (do not edit): it runs the scenarios below one at a time on the\n")
	p("local Kubernetes (`make e2e`'s cluster: 3 nodes on one 2-core machine) and turns their `MEASURE`\n")
	p("lines into this page with `hack/perfreport`. Generated %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	p("## Rolling 3 PVC members: Steward and a plain StatefulSet\n\n")
	p("The same etcd (%s), the same probes, the same client traffic: 2 writers and linearizable readers\n", "3.6 unless stated")
	p("through the client Service, dialled by name through the cluster DNS; the same Pod watch timing\n")
	p("each member's restart. \"Unavailable\" is the longest a member served no client (deleted, or\n")
	p("unready in place, until Ready again). \"Longest gap\" is the longest time no client request\n")
	p("succeeded (it includes any leaderless time). \"Leader changes\" counts distinct leaders seen.\n\n")
	p("| roll | total | longest unavailable | restarts | leader changes | failed requests | latency p50 / p99 / max | longest gap |\n")
	p("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, s := range sideBySide {
		r := rolls[s.label]
		if r == nil {
			p("| %s | not measured | | | | | | |\n", s.what)
			continue
		}
		p("| %s | %s | %s | %s | %s | %s of %s | %s | %s |\n", s.what, r.total, r.unavailable, r.restarts, r.leaders,
			r.failed, r.requests, r.latency, r.gap)
	}
	if chartLink != "" {
		p("\n![Each member's unavailability per roll kind, split into its stages](%s)\n", chartLink)
	}
	p("\n### Each member's restart\n\n")
	p("From the old Pod's deletion (or, in place, from the container going unready): when it left the client\n")
	p("Service before that, when the old Pod was gone, the new one created, its container running, Ready;\n")
	p("then the time to the next member's turn (the recovery gate, the next drain).\n\n")
	for _, s := range sideBySide {
		if r := rolls[s.label]; r != nil && len(r.breakdown) > 0 {
			p("%s:\n\n```\n%s\n```\n\n", s.what, strings.Join(r.breakdown, "\n"))
		}
	}
	p("## Steward's other figures\n\n| what | time |\n| --- | --- |\n")
	for _, k := range order {
		p("| %s | %s |\n", k, other[k])
	}
	if sc == nil {
		p("\n## The operator at scale\n\nNot measured in this run (`make bench-scale`).\n")
		return
	}
	p("\n## The operator at %s clusters\n\n", sc.clusters)
	p("%s one-member clusters (TLS on) under one operator on the same machine, created 8 at a time\n", sc.clusters)
	p("(`TestBenchScale`, `make bench-scale`); memory and CPU over a minute of steady state.\n\n")
	for _, f := range sc.figures {
		p("- %s\n", f)
	}
}
