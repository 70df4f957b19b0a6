// Package pitr decides what a point-in-time restore can reach and how: from a cluster's base
// snapshots and continuous-backup segments (as listed, never opened), the restorable ranges with
// the holes between them, and for a target revision the base and the run of segments to replay.
// Pure: no store, no clock.
package pitr

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Base is a finished snapshot backup: a restore can start from its revision.
type Base struct {
	Name     string
	Revision int64
	// Time is when the snapshot was taken (its manifest's completedAt): what a time target
	// before the first segment can be matched against.
	Time      time.Time
	ClusterID string
}

// Segment is one stored segment: revisions After+1 to Last.
type Segment struct {
	Key         string
	After, Last int64
	// LastStamp is its last revision's stamp (in its name).
	LastStamp time.Time
}

// Range is a run of revisions a restore can reach: any revision From..To, from Base and the
// segments after it.
type Range struct {
	From, To         int64
	FromTime, ToTime time.Time
	Base             string
}

func (r Range) String() string {
	return fmt.Sprintf("revisions %d-%d (%s to %s, base %s)", r.From, r.To,
		r.FromTime.UTC().Format(time.RFC3339), r.ToTime.UTC().Format(time.RFC3339), r.Base)
}

// chainFrom follows segments from revision after: each next segment continues exactly where the
// last ended. Where two segments continue from one revision (a streamer that restarted and wrote
// the same revisions twice), the longer is taken; both are the same history.
func chainFrom(after int64, segs []Segment) []Segment {
	byAfter := map[int64]Segment{}
	for _, s := range segs {
		if cur, ok := byAfter[s.After]; !ok || s.Last > cur.Last {
			byAfter[s.After] = s
		}
	}
	var out []Segment
	for {
		s, ok := byAfter[after]
		if !ok {
			return out
		}
		out = append(out, s)
		after = s.Last
	}
}

// Ranges are the restorable ranges, oldest first, merged where they overlap; the revisions between
// two ranges are a hole no restore can reach.
func Ranges(bases []Base, segs []Segment) []Range {
	var rs []Range
	for _, b := range bases {
		r := Range{From: b.Revision, To: b.Revision, FromTime: b.Time, ToTime: b.Time, Base: b.Name}
		if c := chainFrom(b.Revision, segs); len(c) > 0 {
			r.To, r.ToTime = c[len(c)-1].Last, c[len(c)-1].LastStamp
		}
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].From < rs[j].From })
	var out []Range
	for _, r := range rs {
		if n := len(out); n > 0 && r.From <= out[n-1].To {
			if r.To > out[n-1].To {
				out[n-1].To, out[n-1].ToTime = r.To, r.ToTime
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// Plan is how to reach one revision: a base, and the segments to replay onto it up to To.
type Plan struct {
	Base     Base
	Segments []Segment
	To       int64
}

// Replayed is how many revisions the plan replays.
func (p Plan) Replayed() int64 { return p.To - p.Base.Revision }

// ForRevision plans a restore to rev: of the bases at or before rev whose chain reaches it, the
// newest (the least to replay). A revision in no range is refused with the ranges there are.
func ForRevision(bases []Base, segs []Segment, rev int64) (Plan, error) {
	var best *Plan
	for _, b := range bases {
		if b.Revision > rev || (best != nil && b.Revision <= best.Base.Revision) {
			continue
		}
		var need []Segment
		end := b.Revision
		for _, s := range chainFrom(b.Revision, segs) {
			if end >= rev {
				break
			}
			need, end = append(need, s), s.Last
		}
		if end >= rev {
			best = &Plan{Base: b, Segments: need, To: rev}
		}
	}
	if best == nil {
		return Plan{}, fmt.Errorf("revision %d is not restorable: %s", rev, describe(Ranges(bases, segs)))
	}
	return *best, nil
}

// ForTime maps a time to a revision: the last revision stamped at or before t (a base's stamp is
// its snapshot's time). From listings alone it knows rev, the newest revision whose segment (or
// base) ended at or before t; when the segment continuing from rev ends after t, t may fall inside
// it, and ForTime returns it: the caller reads its revisions' stamps for the last one at or before
// t (Refine). A time before the first base or after the last stamp is refused: a restore never
// quietly lands earlier than asked.
func ForTime(bases []Base, segs []Segment, t time.Time) (rev int64, inside *Segment, err error) {
	var latest time.Time
	found := false
	for _, b := range bases {
		if !b.Time.After(t) && (!found || b.Revision > rev) {
			rev, found = b.Revision, true
		}
		if b.Time.After(latest) {
			latest = b.Time
		}
	}
	for _, s := range segs {
		if s.LastStamp.After(latest) {
			latest = s.LastStamp
		}
		if !s.LastStamp.After(t) && s.Last > rev {
			rev, found = s.Last, true
		}
	}
	switch {
	case !found:
		return 0, nil, fmt.Errorf("%s is before the first base snapshot: %s", t.UTC().Format(time.RFC3339Nano), describe(Ranges(bases, segs)))
	case t.After(latest):
		return 0, nil, fmt.Errorf("%s is after the last revision recorded (stamped %s): %s",
			t.UTC().Format(time.RFC3339Nano), latest.UTC().Format(time.RFC3339Nano), describe(Ranges(bases, segs)))
	}
	if c := chainFrom(rev, segs); len(c) > 0 && c[0].LastStamp.After(t) {
		inside = &c[0]
	}
	return rev, inside, nil
}

// Refine is the last of stamps (a segment's revisions and their stamps, in order) stamped at or
// before t, or rev when none is.
func Refine(rev int64, stamps []Stamp, t time.Time) int64 {
	for _, s := range stamps {
		if s.Time.After(t) {
			break
		}
		if s.Revision > rev {
			rev = s.Revision
		}
	}
	return rev
}

// Stamp is one revision's stamp.
type Stamp struct {
	Revision int64
	Time     time.Time
}

func describe(rs []Range) string {
	if len(rs) == 0 {
		return "there is no base snapshot"
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return "the restorable ranges are " + strings.Join(parts, "; ")
}

// Unreachable are the segments no restore can use: every revision they hold is at or before the
// oldest base. Retention deletes them once the base before them is gone; with no base at all,
// nothing is unreachable (a first base may still be on its way).
func Unreachable(bases []Base, segs []Segment) []Segment {
	if len(bases) == 0 {
		return nil
	}
	oldest := bases[0].Revision
	for _, b := range bases {
		oldest = min(oldest, b.Revision)
	}
	var out []Segment
	for _, s := range segs {
		if s.Last <= oldest {
			out = append(out, s)
		}
	}
	return out
}
