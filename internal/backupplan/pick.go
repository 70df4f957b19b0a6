package backupplan

import "slices"

// LastSuccessful picks the backup a cluster names as its last successful one (the one a
// quorum-loss restore would use): the newest Succeeded backup, unless it asked for a restore drill
// that has not passed (pending or failed) and an older one passed: then that older, verified one,
// and newer is the newest success it was preferred over. A newest backup that never asked for a
// drill wins over older verified ones: verification was off when it was taken, and a month-old
// verified snapshot loses a month of writes. With nothing verified, the newest success is picked
// and newer is nil: an unverified backup beats none. Both are nil when nothing succeeded.
func LastSuccessful(items []Item) (pick, newer *Item) {
	var ok []*Item
	for i := range items {
		if items[i].Phase == PhaseSucceeded {
			ok = append(ok, &items[i])
		}
	}
	if len(ok) == 0 {
		return nil, nil
	}
	slices.SortFunc(ok, func(a, b *Item) int { return newestFirst(*a, *b) })
	newest := ok[0]
	if newest.Drill == DrillNone || newest.Drill == DrillPassed {
		return newest, nil
	}
	for _, it := range ok[1:] {
		if it.Drill == DrillPassed {
			return it, newest
		}
	}
	return newest, nil
}
