package pitr

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 4, 14, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func base(name string, rev int64, s int) Base { return Base{Name: name, Revision: rev, Time: at(s)} }

// seg covers revisions after+1..last, stamped one second a revision from second s0.
func seg(after, last int64, s0 int) Segment {
	return Segment{Key: fmt.Sprintf("%d-%d", after, last), After: after, Last: last, LastStamp: at(s0 + int(last-after-1))}
}

func TestRanges(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bases []Base
		segs  []Segment
		want  string
	}{
		{"nothing", nil, nil, ""},
		{"a base alone", []Base{base("b1", 100, 0)}, nil, "100-100@b1"},
		{"a base and its chain", []Base{base("b1", 100, 0)}, []Segment{seg(100, 110, 1), seg(110, 120, 11)}, "100-120@b1"},
		{"segments before any base reach nothing", []Base{base("b1", 100, 0)}, []Segment{seg(50, 100, 0), seg(100, 105, 1)}, "100-105@b1"},
		{"a hole: the chain stops, a new base after it", []Base{base("b1", 100, 0), base("b2", 130, 40)},
			[]Segment{seg(100, 110, 1), seg(120, 130, 30), seg(130, 140, 41)}, "100-110@b1 130-140@b2"},
		{"two bases on one chain merge", []Base{base("b1", 100, 0), base("b2", 110, 11)},
			[]Segment{seg(100, 110, 1), seg(110, 120, 11)}, "100-120@b1"},
		{"a segment written twice (a restarted streamer): the longer", []Base{base("b1", 100, 0)},
			[]Segment{seg(100, 105, 1), seg(100, 110, 1), seg(110, 111, 11)}, "100-111@b1"},
		{"bases out of order", []Base{base("b2", 300, 90), base("b1", 100, 0)}, []Segment{seg(100, 101, 1)}, "100-101@b1 300-300@b2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, r := range Ranges(tc.bases, tc.segs) {
				got = append(got, fmt.Sprintf("%d-%d@%s", r.From, r.To, r.Base))
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("Ranges = %q, want %q", g, tc.want)
			}
		})
	}
}

func TestForRevision(t *testing.T) {
	bases := []Base{base("b1", 100, 0), base("b2", 115, 16), base("b3", 200, 100)}
	segs := []Segment{seg(100, 110, 1), seg(110, 120, 11), seg(120, 130, 21), seg(140, 150, 40), seg(200, 210, 101)}
	for _, tc := range []struct {
		rev     int64
		base    string
		segs    string
		refused string
	}{
		{rev: 100, base: "b1", segs: ""},
		{rev: 101, base: "b1", segs: "100-110"},
		{rev: 110, base: "b1", segs: "100-110"},
		{rev: 111, base: "b1", segs: "100-110 110-120"},
		// b2 (115) is newer but sits inside a segment: nothing continues from 115.
		{rev: 116, base: "b1", segs: "100-110 110-120"},
		{rev: 115, base: "b2", segs: ""},
		{rev: 130, base: "b1", segs: "100-110 110-120 120-130"},
		{rev: 131, refused: "revision 131 is not restorable: the restorable ranges are revisions 100-130"},
		{rev: 145, refused: "not restorable"}, // segments after a hole, with no base under them
		{rev: 99, refused: "not restorable"},
		{rev: 205, base: "b3", segs: "200-210"},
		{rev: 211, refused: "revisions 200-210"},
	} {
		t.Run(fmt.Sprint(tc.rev), func(t *testing.T) {
			p, err := ForRevision(bases, segs, tc.rev)
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("error %v, want %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, s := range p.Segments {
				keys = append(keys, s.Key)
			}
			if p.Base.Name != tc.base || strings.Join(keys, " ") != tc.segs || p.To != tc.rev || p.Replayed() != tc.rev-p.Base.Revision {
				t.Errorf("plan base %s segments %v to %d, want %s %q", p.Base.Name, keys, p.To, tc.base, tc.segs)
			}
		})
	}
	if _, err := ForRevision(nil, segs, 105); err == nil || !strings.Contains(err.Error(), "there is no base snapshot") {
		t.Errorf("no base: %v", err)
	}
}

func TestForTime(t *testing.T) {
	// b1 at 0 (rev 100); segments stamp revision 100+k at second k.
	bases := []Base{base("b1", 100, 0)}
	segs := []Segment{seg(100, 110, 1), seg(110, 120, 11)}
	for _, tc := range []struct {
		name    string
		t       time.Time
		rev     int64
		inside  string
		refused string
	}{
		// Without the first stamp, the segment that continues is read (Refine keeps rev if none fits).
		{name: "the base's own time", t: at(0), rev: 100, inside: "100-110"},
		{name: "before the first stamp of a segment", t: at(0).Add(500 * time.Millisecond), rev: 100, inside: "100-110"},
		{name: "inside the first segment", t: at(5).Add(time.Millisecond), rev: 100, inside: "100-110"},
		{name: "at the last stamp of a segment", t: at(10), rev: 110, inside: "110-120"},
		{name: "between two segments", t: at(10).Add(500 * time.Millisecond), rev: 110, inside: "110-120"},
		{name: "inside the second", t: at(15), rev: 110, inside: "110-120"},
		{name: "the last stamp", t: at(20), rev: 120},
		{name: "after the last stamp", t: at(20).Add(time.Second), refused: "after the last revision recorded"},
		{name: "before the first base", t: at(-1), refused: "before the first base snapshot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rev, inside, err := ForTime(bases, segs, tc.t)
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("error %v, want %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			key := ""
			if inside != nil {
				key = inside.Key
			}
			if rev != tc.rev || key != tc.inside {
				t.Errorf("ForTime = %d inside %q, want %d inside %q", rev, key, tc.rev, tc.inside)
			}
		})
	}
}

func TestRefine(t *testing.T) {
	stamps := []Stamp{{101, at(1)}, {102, at(2)}, {103, at(2)}, {104, at(4)}}
	for _, tc := range []struct {
		t    time.Time
		want int64
	}{
		{at(0), 100}, {at(1), 101}, {at(2), 103}, {at(3), 103}, {at(4), 104}, {at(9), 104},
	} {
		if got := Refine(100, stamps, tc.t); got != tc.want {
			t.Errorf("Refine(%s) = %d, want %d", tc.t.Format("05"), got, tc.want)
		}
	}
}

func TestUnreachable(t *testing.T) {
	segs := []Segment{seg(50, 90, 0), seg(90, 100, 0), seg(100, 110, 0), seg(110, 120, 0)}
	keys := func(ss []Segment) string {
		var out []string
		for _, s := range ss {
			out = append(out, s.Key)
		}
		return strings.Join(out, " ")
	}
	if got := keys(Unreachable([]Base{base("b2", 110, 0), base("b1", 100, 0)}, segs)); got != "50-90 90-100" {
		t.Errorf("Unreachable = %q, want the segments ending at or before the oldest base (100)", got)
	}
	if got := Unreachable(nil, segs); got != nil {
		t.Errorf("no base: %v, want nothing unreachable", got)
	}
	// Every revision a kept base can reach stays: the chain from each base is whole after pruning.
	bases := []Base{base("b1", 100, 0)}
	before := Ranges(bases, segs)
	var kept []Segment
	gone := map[string]bool{}
	for _, s := range Unreachable(bases, segs) {
		gone[s.Key] = true
	}
	for _, s := range segs {
		if !gone[s.Key] {
			kept = append(kept, s)
		}
	}
	if after := Ranges(bases, kept); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("ranges %v after pruning, %v before", after, before)
	}
}
