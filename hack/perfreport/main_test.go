package main

import (
	"bytes"
	"strings"
	"testing"
)

// The scale benchmark's summary becomes a section of its own, each figure a line, and is not
// mistaken for a plain time (it ends in one).
func TestScaleSection(t *testing.T) {
	log := sample + `    benchscale_test.go:9: MEASURE operator at 100 clusters: formed in 93s; resident memory 99.0 MiB; a deleted member's Pod recreated in 0.39s, the cluster settled in 3.8s
`
	rolls, other, order, sc, err := parse(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if sc == nil || sc.clusters != "100" || len(sc.figures) != 3 || sc.figures[1] != "resident memory 99.0 MiB" {
		t.Fatalf("scale %+v", sc)
	}
	if len(order) != 0 {
		t.Errorf("plain times %v, want none", other)
	}
	var out bytes.Buffer
	write(&out, rolls, other, order, sc, "")
	page := out.String()
	for _, want := range []string{"## The operator at 100 clusters", "- formed in 93s\n", "- a deleted member's Pod recreated in 0.39s, the cluster settled in 3.8s\n"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	out.Reset()
	write(&out, rolls, other, order, nil, "")
	if !strings.Contains(out.String(), "Not measured in this run") {
		t.Errorf("without the benchmark the page does not say so:\n%s", out.String())
	}
}
