package failpoint

import (
	"strings"
	"testing"
)

// The campaign picks from Points, so every point must be listed once and come in before/after
// pairs: a point missing from the list is a crash nobody tests.
func TestPointsArePairedAndUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range Points {
		if seen[p] {
			t.Errorf("%q listed twice", p)
		}
		seen[p] = true
	}
	for _, p := range Points {
		op, ok := strings.CutPrefix(p, "before-")
		if !ok {
			op, ok = strings.CutPrefix(p, "after-")
		}
		if !ok || op == "" {
			t.Errorf("%q is neither before-X nor after-X", p)
			continue
		}
		if !seen["before-"+op] || !seen["after-"+op] {
			t.Errorf("%q has no pair in Points", p)
		}
	}
}
