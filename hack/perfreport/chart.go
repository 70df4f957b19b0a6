package main

import (
	"fmt"
	"image/color"
	"io"
	"regexp"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// restart is one member's restart as a breakdown line gives it, in seconds from the old Pod's
// deletion (rebuilt) or from the container going unready (in place).
type restart struct {
	member                       string
	inPlace                      bool
	gone, created, running, read float64
}

var (
	rebuiltLine = regexp.MustCompile(`^(\S+): out of Service [0-9.]+s before delete; deleted → gone ([0-9.]+)s → created ([0-9.]+)s → running ([0-9.]+)s → Ready ([0-9.]+)s`)
	inPlaceLine = regexp.MustCompile(`^(\S+): in place; out of Service [0-9.]+s before unready; unready → Ready ([0-9.]+)s`)
)

// parseRestarts reads the breakdown lines of one roll; lines of another shape are left out.
func parseRestarts(lines []string) []restart {
	var out []restart
	f := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
	for _, l := range lines {
		if g := rebuiltLine.FindStringSubmatch(l); g != nil {
			out = append(out, restart{member: g[1], gone: f(g[2]), created: f(g[3]), running: f(g[4]), read: f(g[5])})
		} else if g := inPlaceLine.FindStringSubmatch(l); g != nil {
			out = append(out, restart{member: g[1], inPlace: true, read: f(g[2])})
		}
	}
	return out
}

// stages are the chart's stacked segments, first to last. An in-place restart is one segment: its
// container is unready until Ready, with no Pod to delete or create.
var stages = []struct {
	name  string
	color color.RGBA
	of    func(r restart) float64
}{
	{"old Pod terminating", color.RGBA{R: 0x9e, G: 0x9e, B: 0x9e, A: 0xff}, func(r restart) float64 { return r.gone }},
	{"new Pod created", color.RGBA{R: 0x42, G: 0x85, B: 0xf4, A: 0xff}, func(r restart) float64 { return r.created - r.gone }},
	{"starting (sandbox, init, etcd)", color.RGBA{R: 0xf4, G: 0xb4, B: 0x00, A: 0xff}, func(r restart) float64 { return r.running - r.created }},
	{"running → Ready (probes)", color.RGBA{R: 0xdb, G: 0x44, B: 0x37, A: 0xff}, func(r restart) float64 {
		if r.inPlace {
			return 0
		}
		return r.read - r.running
	}},
	{"in place: unready → Ready", color.RGBA{R: 0x0f, G: 0x9d, B: 0x58, A: 0xff}, func(r restart) float64 {
		if r.inPlace {
			return r.read
		}
		return 0
	}},
}

// chart draws each member's unavailability per roll kind as stacked horizontal bars (SVG), the
// StatefulSet's first, so the page shows where each kind's seconds go.
func chart(w io.Writer, rolls map[string]*roll) error {
	type bar struct {
		label string
		r     restart
	}
	var bars []bar
	for _, s := range sideBySide {
		r := rolls[s.label]
		if r == nil {
			continue
		}
		for _, m := range parseRestarts(r.breakdown) {
			bars = append(bars, bar{s.short + ": " + m.member, m})
		}
	}
	if len(bars) == 0 {
		return fmt.Errorf("no restart breakdown to draw")
	}
	// Bars are drawn bottom-up; reverse so the first roll is on top.
	for i, j := 0, len(bars)-1; i < j; i, j = i+1, j-1 {
		bars[i], bars[j] = bars[j], bars[i]
	}
	p := plot.New()
	p.Title.Text = "A member's unavailability per roll (s)"
	p.X.Label.Text = "seconds from the old Pod's deletion (in place: from unready) to Ready"
	p.X.Min = 0
	longest := 0.0
	for _, b := range bars {
		longest = max(longest, b.r.read)
	}
	p.X.Max = longest * 1.6 // room on the right for the legend, clear of the bars
	p.Legend.Top = true
	p.Legend.Left = false
	var below *plotter.BarChart
	for _, st := range stages {
		vals := make(plotter.Values, len(bars))
		for i, b := range bars {
			vals[i] = st.of(b.r)
		}
		bc, err := plotter.NewBarChart(vals, vg.Points(12))
		if err != nil {
			return err
		}
		bc.Horizontal = true
		bc.Color = st.color
		bc.LineStyle.Width = 0
		if below != nil {
			bc.StackOn(below)
		}
		below = bc
		p.Add(bc)
		p.Legend.Add(st.name, bc)
	}
	labels := make([]string, len(bars))
	for i, b := range bars {
		labels[i] = b.label
	}
	p.NominalY(labels...)
	p.Add(plotter.NewGrid())
	c := vgsvg.New(8*vg.Inch, vg.Length(1.6+0.22*float64(len(bars)))*vg.Inch)
	p.Draw(draw.New(c))
	_, err := c.WriteTo(w)
	return err
}
