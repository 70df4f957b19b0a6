package main

import (
	"bytes"
	"strings"
	"testing"
)

const sample = `=== RUN TestStatefulSetBaseline
    x_test.go:1: MEASURE statefulset rolling restart 3-pvc: 3 member restarts, longest unavailable 4.04s
        base-2: out of Service 0.00s before delete; deleted → gone 2.11s → created 2.12s → running 3.08s → Ready 3.81s; Ready → next deletion 0.02s
        base-1: out of Service 0.00s before delete; deleted → gone 1.99s → created 2.00s → running 2.93s → Ready 4.00s
    x_test.go:2: MEASURE version 3.6.16 -> 3.7.3: 3 member restarts, longest unavailable 2.15s
        web-2: in place; out of Service 3.55s before unready; unready → Ready 2.15s; Ready → next deletion 4.53s
    x_test.go:3: MEASURE options roll 3-pvc: roll 31.4s; leaders [a b]
`

func TestChartFromTheLog(t *testing.T) {
	rolls, _, _, _, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	got := parseRestarts(rolls["statefulset rolling restart 3-pvc"].breakdown)
	want := restart{member: "base-2", gone: 2.11, created: 2.12, running: 3.08, read: 3.81}
	if len(got) != 2 || got[0] != want {
		t.Fatalf("rebuilt restarts %+v, want first %+v", got, want)
	}
	inPlace := parseRestarts(rolls["version 3.6.16 -> 3.7.3"].breakdown)
	if len(inPlace) != 1 || !inPlace[0].inPlace || inPlace[0].read != 2.15 {
		t.Fatalf("in-place restarts %+v", inPlace)
	}
	// The stages of a bar add up to its time to Ready.
	for _, r := range append(got, inPlace...) {
		sum := 0.0
		for _, st := range stages {
			sum += st.of(r)
		}
		if d := sum - r.read; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: stages add up to %.2f, Ready at %.2f", r.member, sum, r.read)
		}
	}
	var svg bytes.Buffer
	if err := chart(&svg, rolls); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"<svg", "StatefulSet: base-2", "3.6 → 3.7: web-2", "running → Ready (probes)"} {
		if !strings.Contains(svg.String(), s) {
			t.Errorf("the chart lacks %q", s)
		}
	}
	if err := chart(&svg, nil); err == nil {
		t.Error("a chart of nothing drew")
	}
}
