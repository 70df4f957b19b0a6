package framework

import (
	"strings"
	"testing"
)

// Two runs with one configured prefix (a chained roll watched twice on one cluster) write disjoint
// keys: the linearizability check models each run's shared keys as absent at its start.
func TestRunsHaveTheirOwnKeys(t *testing.T) {
	a, b := runPrefix("/roll/"), runPrefix("/roll/")
	if a == b || !strings.HasPrefix(a, "/roll/") || !strings.HasPrefix(b, "/roll/") || strings.HasPrefix(a, b) || strings.HasPrefix(b, a) {
		t.Fatalf("run prefixes %q and %q", a, b)
	}
}
