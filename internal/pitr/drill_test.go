package pitr

import (
	"strings"
	"testing"
)

func TestDrillTarget(t *testing.T) {
	two := []Range{{From: 100, To: 150, Base: "b1"}, {From: 200, To: 210, Base: "b2"}}
	for _, tc := range []struct {
		name      string
		ranges    []Range
		compacted int64
		pick      int64 // what pick returns
		want      int64
		wantTotal int64 // the n pick is asked for
		err       string
	}{
		{"first revision after the base", two, 0, 0, 101, 60, ""},
		{"last of the first range", two, 0, 49, 150, 60, ""},
		{"first of the second range", two, 0, 50, 201, 60, ""},
		{"last of all", two, 0, 59, 210, 60, ""},
		{"compaction inside the first range", two, 139, 0, 140, 21, ""},
		{"compaction past the first range", two, 160, 0, 201, 10, ""},
		{"compaction inside the second range", two, 205, 4, 210, 5, ""},
		{"everything compacted", two, 210, 0, 0, 0, "compacted to 210"},
		{"a base alone replays nothing", []Range{{From: 100, To: 100, Base: "b1"}}, 0, 0, 0, 0, "no restorable revision past a base"},
		{"no base", nil, 0, 0, 0, 0, "no base backup"},
	} {
		var asked int64
		got, err := DrillTarget(tc.ranges, tc.compacted, func(n int64) int64 { asked = n; return tc.pick })
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %d, %v; want an error naming %q", tc.name, got, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want || asked != tc.wantTotal):
			t.Errorf("%s: %d (pick asked for %d), %v; want %d (asked %d)", tc.name, got, asked, err, tc.want, tc.wantTotal)
		}
	}
}
