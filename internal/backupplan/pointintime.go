package backupplan

import (
	"fmt"
	"strings"
	"time"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// PointInTimeHold says why the schedule's restorable ranges cannot reach the target ("" when they
// can, or when the schedule has not reported: the seed's fetch then decides, and refuses clearly).
func PointInTimeHold(c *stewardv1.ContinuousBackupStatus, p *stewardv1.PointInTimeSpec) string {
	if c == nil || len(c.Restorable) == 0 {
		return ""
	}
	var ranges []string
	for _, rg := range c.Restorable {
		switch {
		case p.Revision != nil && *p.Revision >= rg.FromRevision && *p.Revision <= rg.ToRevision:
			return ""
		case p.Time != nil && rg.FromTime != nil && rg.ToTime != nil && !p.Time.Before(rg.FromTime) && !rg.ToTime.Before(p.Time):
			return ""
		}
		ranges = append(ranges, RangeText(rg))
	}
	last := c.Restorable[len(c.Restorable)-1]
	target := ""
	switch {
	case p.Revision != nil:
		target = fmt.Sprintf("revision %d", *p.Revision)
		if *p.Revision > last.ToRevision {
			return target + " is not durable yet (the continuous backup has reached " + RangeText(last) + "); waiting"
		}
	case p.Time != nil:
		target = p.Time.UTC().Format(time.RFC3339Nano)
		if last.ToTime != nil && p.Time.After(last.ToTime.Time) {
			return target + " is not durable yet (the continuous backup has reached " + RangeText(last) + "); waiting"
		}
	}
	return target + " is not restorable: the restorable ranges are " + strings.Join(ranges, "; ")
}

// RangeText says a restorable range for people.
func RangeText(rg stewardv1.RestorableRange) string {
	from, to := "", ""
	if rg.FromTime != nil {
		from = rg.FromTime.UTC().Format(time.RFC3339)
	}
	if rg.ToTime != nil {
		to = rg.ToTime.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("revisions %d-%d (%s to %s, base %s)", rg.FromRevision, rg.ToRevision, from, to, rg.Base)
}
