package framework

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Why a member counts as unavailable at an instant.
const (
	ReasonPodMissing = "pod missing"
	ReasonNotReady   = "pod not ready"
	ReasonNotVoter   = "not a voter" // a learner, or absent from the member list
)

// PodObservation is what the monitor saw of one Pod.
type PodObservation struct {
	Name  string
	Ready bool // Ready condition true and not being deleted
}

// MemberObservation is one entry of etcd's MemberList.
type MemberObservation struct {
	Name    string // empty until the member has started
	Learner bool
}

// MemberState is one expected member's availability at one instant.
type MemberState struct {
	Name    string
	Reasons []string // empty when available
}

// Sample is the cluster's state at one instant.
type Sample struct {
	At time.Time
	// Done is when the sample's last read returned (zero: at once). The member list may take
	// seconds to fail, so what it says holds somewhere in [At, Done], not at At.
	Done        time.Time
	Unavailable int
	Members     []MemberState
	ListErr     string // the MemberList error, if it failed
	// Unknown: the Kubernetes API did not answer the Pod list in time, so this instant says
	// nothing about the members (a slow API server is not an etcd disruption); it counts no
	// member unavailable and is shown as such.
	Unknown bool
}

// UnknownSample is an instant the monitor could not observe.
func UnknownSample(at time.Time, err error) Sample {
	return Sample{At: at, Unknown: true, ListErr: "pod list: " + err.Error()}
}

// Evaluate decides, for each expected member, whether it is available: its Pod exists
// and is Ready, and etcd lists it as a started voter. members == nil means the member
// list could not be read (listErr; linearizable, so it fails without quorum): that
// proves only that a majority is not serving, so the instant counts the Pods' own
// failures but never fewer than the smallest number of members whose loss ends quorum.
// Counting every member (the earlier reading) turned "two of three down, as the test
// allowed" into three.
func Evaluate(at time.Time, expected []string, pods []PodObservation, members []MemberObservation, listErr error) Sample {
	podByName := map[string]PodObservation{}
	for _, p := range pods {
		podByName[p.Name] = p
	}
	memberByName := map[string]MemberObservation{}
	for _, m := range members {
		if m.Name != "" {
			memberByName[m.Name] = m
		}
	}
	s := Sample{At: at}
	if listErr != nil {
		s.ListErr = listErr.Error()
	}
	for _, name := range expected {
		st := MemberState{Name: name}
		p, ok := podByName[name]
		switch {
		case !ok:
			st.Reasons = append(st.Reasons, ReasonPodMissing)
		case !p.Ready:
			st.Reasons = append(st.Reasons, ReasonNotReady)
		}
		m, listed := memberByName[name]
		switch {
		case members == nil:
		case !listed:
			st.Reasons = append(st.Reasons, ReasonNotVoter)
		case m.Learner:
			st.Reasons = append(st.Reasons, ReasonNotVoter)
		}
		if len(st.Reasons) > 0 {
			s.Unavailable++
		}
		s.Members = append(s.Members, st)
	}
	if members == nil {
		s.Unavailable = max(s.Unavailable, len(expected)-len(expected)/2)
	}
	return s
}

// Timeline is the monitor's record, one Sample per poll.
type Timeline []Sample

// Max is the largest number of members unavailable at the same instant.
func (tl Timeline) Max() int {
	m := 0
	for _, s := range tl {
		m = max(m, s.Unavailable)
	}
	return m
}

// FirstReaching is the first sample with at least n unavailable members.
func (tl Timeline) FirstReaching(n int) (Sample, bool) {
	for _, s := range tl {
		if s.Unavailable >= n {
			return s, true
		}
	}
	return Sample{}, false
}

// Duration is how long at least n members were unavailable, summing the intervals
// from each such sample to the next one.
func (tl Timeline) Duration(n int) time.Duration {
	var d time.Duration
	for i := 0; i+1 < len(tl); i++ {
		if tl[i].Unavailable >= n {
			d += tl[i+1].At.Sub(tl[i].At)
		}
	}
	return d
}

// Changes keeps the first sample and every sample whose state differs from the one
// before: the readable form of a timeline with thousands of samples.
func (tl Timeline) Changes() Timeline {
	var out Timeline
	prev := ""
	for _, s := range tl {
		if k := s.key(); k != prev || len(out) == 0 {
			out = append(out, s)
			prev = k
		}
	}
	return out
}

func (s Sample) key() string { return fmt.Sprint(s.Unknown, s.Unavailable, s.Members) }

// String renders one sample: time, count, and the unavailable members with reasons.
func (s Sample) String() string {
	var parts []string
	for _, m := range s.Members {
		if len(m.Reasons) > 0 {
			parts = append(parts, m.Name+": "+strings.Join(m.Reasons, ", "))
		}
	}
	sort.Strings(parts)
	if s.Unknown {
		return fmt.Sprintf("%s unknown (%s)", s.At.Format("15:04:05.000"), shortErr(s.ListErr))
	}
	out := fmt.Sprintf("%s unavailable=%d", s.At.Format("15:04:05.000"), s.Unavailable)
	if len(parts) > 0 {
		out += " [" + strings.Join(parts, "; ") + "]"
	}
	if s.ListErr != "" {
		out += " (member list: " + shortErr(s.ListErr) + ")"
	}
	return out
}

// String renders the changes of the timeline, one line each.
func (tl Timeline) String() string {
	var b strings.Builder
	for _, s := range tl.Changes() {
		b.WriteString(s.String())
		b.WriteByte('\n')
	}
	return b.String()
}
