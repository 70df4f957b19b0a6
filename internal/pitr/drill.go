package pitr

import (
	"errors"
	"fmt"
)

// DrillTarget picks the revision a point-in-time drill restores: uniform over every restorable
// revision the live cluster still holds (after its compacted revision), so that its keyspace at
// the target can be read from the live cluster and compared. pick(n) returns a number in [0, n).
// A target that replays nothing (a base's own revision) is avoided while any other is possible:
// the drill is for the chain.
func DrillTarget(ranges []Range, compacted int64, pick func(n int64) int64) (int64, error) {
	type span struct{ from, to int64 }
	var spans []span
	var total int64
	for _, r := range ranges {
		from := max(r.From+1, compacted+1) // after the base: a revision some segment carries
		if from > r.To {
			continue
		}
		spans = append(spans, span{from, r.To})
		total += r.To - from + 1
	}
	if total == 0 {
		if len(ranges) == 0 {
			return 0, errors.New("nothing is restorable yet: no base backup")
		}
		return 0, fmt.Errorf("no restorable revision past a base is still held by the live cluster (compacted to %d; restorable %s)",
			compacted, describe(ranges))
	}
	n := pick(total)
	for _, s := range spans {
		if size := s.to - s.from + 1; n >= size {
			n -= size
			continue
		}
		return s.from + n, nil
	}
	return spans[len(spans)-1].to, nil
}
