package chaos

import (
	"fmt"
	"slices"
	"time"
)

// Observation is one instant of the disruption monitor: which expected members were
// unavailable, and whether etcd's member list failed for want of quorum.
type Observation struct {
	At time.Time
	// End is when the observation's reads finished (zero: At). A fault that began in [At, End]
	// may be what it saw: a member list that failed after three seconds of tries failed for want of
	// a member killed in the meantime.
	End         time.Time
	Unavailable []string
	QuorumLost  bool
	Unknown     bool // the monitor could not see (the API server did not answer): says nothing
}

// Window is a member fault the campaign injected, from its start until it was lifted (a kill is
// lifted at once: From == To).
type Window struct {
	Member   string
	Fault    Fault
	From, To time.Time
}

// Violation is an invariant broken at an instant.
type Violation struct {
	At        time.Time `json:"at"`
	Invariant string    `json:"invariant"`
	Detail    string    `json:"detail"`
}

const (
	InvOneDisruption = "at most one member disrupted by Steward"
	InvQuorum        = "no quorum loss caused by Steward"
	InvFixBefore     = "no disruption while another member is down from a fault"
	InvLinearizable  = "history linearizable"
	InvNoLostWrites  = "0 acknowledged writes lost"
	InvHonestStatus  = "status never done while a member is outdated"
	InvConverges     = "converges to the spec after the faults stop"
	// InvNoRecovery: the campaign never destroys a majority's data, so a quorum recovery that
	// starts is one started while etcd had quorum (issue 23).
	InvNoRecovery     = "no quorum recovery while etcd has quorum"
	attributionWindow = 10 * time.Second
	// gateGrace: Steward decides from reads a moment old; a disruption it started within this
	// much of a fault's start was decided before it could see the fault.
	gateGrace = 3 * time.Second
)

// interval is one member's continuous unavailability.
type interval struct {
	member     string
	from, to   time.Time // to is zero while it lasts
	fault      bool      // the campaign's doing: it began while, or shortly after, a fault struck this member
	faultCause Fault
}

func (i interval) covers(t time.Time) bool {
	return !t.Before(i.from) && (i.to.IsZero() || t.Before(i.to))
}

// Account tells the campaign's disruptions from Steward's and returns the broken invariants.
// A member's unavailability counts as the campaign's when it began inside one of that member's
// fault windows or within attributionWindow after it ended (a probe notices a kill only after a
// period); all else is Steward's.
func Account(obs []Observation, windows []Window) []Violation {
	ivs := intervals(obs, windows)
	var out []Violation
	reported := map[string]bool{}
	add := func(v Violation) {
		key := v.Invariant + "\x00" + v.Detail
		if !reported[key] {
			reported[key] = true
			out = append(out, v)
		}
	}
	for _, o := range obs {
		if o.Unknown {
			continue
		}
		var steward, faulted []string
		for _, iv := range ivs {
			if !iv.covers(o.At) {
				continue
			}
			if iv.fault {
				faulted = append(faulted, iv.member)
			} else {
				steward = append(steward, iv.member)
			}
		}
		if len(steward) > 1 {
			add(Violation{At: o.At, Invariant: InvOneDisruption, Detail: fmt.Sprintf("%v unavailable at once, none from a fault", steward)})
		}
		if o.QuorumLost && len(faulted) == 0 && !faultActive(windows, o) {
			add(Violation{At: o.At, Invariant: InvQuorum, Detail: fmt.Sprintf("quorum lost with no fault active (unavailable %v)", o.Unavailable)})
		}
	}
	for _, s := range ivs {
		if s.fault {
			continue
		}
		for _, f := range ivs {
			if f.fault && f.member != s.member && f.covers(s.from) && s.from.Sub(f.from) > gateGrace {
				add(Violation{At: s.from, Invariant: InvFixBefore,
					Detail: fmt.Sprintf("%s went down %s after %s did (%s)", s.member, s.from.Sub(f.from).Round(100*time.Millisecond), f.member, f.faultCause)})
			}
		}
	}
	return out
}

func faultActive(windows []Window, o Observation) bool {
	return slices.ContainsFunc(windows, func(w Window) bool { return overlaps(o, w) })
}

// overlaps: the observation's span [At, End] meets the window extended by attributionWindow.
func overlaps(o Observation, w Window) bool {
	end := o.End
	if end.Before(o.At) {
		end = o.At
	}
	return !end.Before(w.From) && !o.At.After(w.To.Add(attributionWindow))
}

func intervals(obs []Observation, windows []Window) []interval {
	open := map[string]int{} // member -> index in out
	var out []interval
	for _, o := range obs {
		if o.Unknown {
			continue
		}
		down := map[string]bool{}
		for _, m := range o.Unavailable {
			down[m] = true
			if _, ok := open[m]; ok {
				continue
			}
			iv := interval{member: m, from: o.At}
			for _, w := range windows {
				if w.Member == m && overlaps(o, w) {
					iv.fault, iv.faultCause = true, w.Fault
				}
			}
			open[m] = len(out)
			out = append(out, iv)
		}
		for m, i := range open {
			if !down[m] {
				out[i].to = o.At
				delete(open, m)
			}
		}
	}
	return out
}
