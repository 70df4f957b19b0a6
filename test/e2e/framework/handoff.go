package framework

import (
	"slices"
	"strings"
)

// HandedOff says whether leadership left lead before it was disrupted: through the operator's
// MoveLeader (moves, its event messages), or through an election of etcd's own (a loaded host makes
// them), seen in leaders, the distinct consecutive leaders the staying members named up to the
// disruption. seen says the disruption itself was observed; without it the trail proves nothing.
// An operator disrupting the leader leaves the trail ending on it.
func HandedOff(lead string, moves, leaders []string, seen bool) bool {
	if slices.ContainsFunc(moves, func(m string) bool { return strings.HasPrefix(m, "moving leadership from "+lead+" to ") }) {
		return true
	}
	n := len(leaders)
	return seen && n > 1 && slices.Contains(leaders, lead) && leaders[n-1] != lead
}
