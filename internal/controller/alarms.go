package controller

import (
	"cmp"
	"slices"

	"github.com/etcd-steward/steward/internal/etcd"
	"github.com/etcd-steward/steward/internal/health"
)

// addAlarms merges one endpoint's alarm list into the cluster's. Every member reports the same
// replicated list, but one that lags a heartbeat may not have applied a new alarm yet, so the union
// is taken; sorted, so status does not flap on the order endpoints answered in.
func addAlarms(all []health.Alarm, reported []etcd.Alarm) []health.Alarm {
	for _, a := range reported {
		h := health.Alarm{MemberID: a.MemberID, Type: a.Type}
		if !slices.Contains(all, h) {
			all = append(all, h)
		}
	}
	slices.SortFunc(all, func(a, b health.Alarm) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.MemberID, b.MemberID))
	})
	return all
}
