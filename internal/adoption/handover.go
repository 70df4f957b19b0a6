// Package adoption is the pure logic of taking over a running etcd cluster (spec.bootstrap.join):
// the preflight's checks of the source, and the hand-over arithmetic that keeps the cluster at or
// above its fault tolerance while Steward's members replace the source's one at a time.
//
// Nothing here does I/O: the controller reads the source, internal/plan decides the next action.
package adoption

import (
	"cmp"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Move is the next hand-over step.
type Move string

const (
	// Add a Steward member (it joins as a learner and is promoted before anything else happens).
	Add Move = "Add"
	// RemoveSource removes one source member from etcd.
	RemoveSource Move = "RemoveSource"
	// Finished: no source member is left and Steward has its replicas (or as many as it may).
	Finished Move = "Finished"
)

// Next is the hand-over arithmetic. ours are Steward's voters, sources the source's voters left,
// replicas the target size. The voter count never drops below min(source size, replicas), so the
// fault tolerance never drops below the lower of the source's and the target's:
//
//   - add while Steward is short and the cluster would not outgrow replicas+1;
//   - otherwise remove a source member.
//
// A 3-member source into 3: 3 → 4 → 3 → 4 → 3 → 4 → 3. A 5-member source into 3: 5 → 4 → 3 → 4 → 3 …
// (the source's spare members go first, so the cluster never grows past 5). One into 3: 1 → 2 → 3
// → 4 → 3.
func Next(ours, sources, replicas int) Move {
	switch {
	case ours < replicas && ours+sources <= replicas:
		return Add
	case sources > 0:
		return RemoveSource
	case ours < replicas:
		return Add
	}
	return Finished
}

var trailingNumber = regexp.MustCompile(`(\d+)$`)

// Ordinal is a name's trailing number (etcd-2 → 2, a StatefulSet Pod's ordinal), -1 when it has none.
func Ordinal(name string) int {
	m := trailingNumber.FindString(name)
	if m == "" {
		return -1
	}
	n, err := strconv.Atoi(m)
	if err != nil {
		return -1
	}
	return n
}

// RemovalOrder sorts source member names in the order they leave: highest ordinal first, as a
// StatefulSet scales down (etcd-2, etcd-1, etcd-0), then by name, descending, for names without one.
func RemovalOrder(names []string) []string {
	out := slices.Clone(names)
	slices.SortStableFunc(out, func(a, b string) int {
		if c := cmp.Compare(Ordinal(b), Ordinal(a)); c != 0 {
			return c
		}
		return strings.Compare(b, a)
	})
	return out
}

// PodOf matches a member's peer URL to a StatefulSet Pod: a Pod's stable DNS name begins with its
// own name (<pod>.<headless service>.<namespace>...). "" when no Pod of the list matches.
func PodOf(peerURL string, pods []string) string {
	host := peerURL
	if i := strings.Index(host, "://"); i >= 0 {
		host = host[i+3:]
	}
	if i := strings.IndexAny(host, ":/"); i >= 0 {
		host = host[:i]
	}
	first, _, _ := strings.Cut(host, ".")
	for _, p := range pods {
		if p == first {
			return p
		}
	}
	return ""
}
