// Package eviction makes the eviction of a member Pod (kubectl drain, a node upgrade) a planned
// step. `kubectl drain` evicts milliseconds after it cordons, so watching cannot win; instead a
// validating admission webhook on pods/eviction answers 429 (kubectl drain retries every 5 s) until
// the member is prepared: leadership moved off it and it left the client Service. The webhook only
// records the request on the Pod (AnnotationEvictionRequested) and answers from the Pod's state; the
// planner prepares the member through the disruption chokepoint (disruption.Evict), one at a time
// and only on a healthy cluster. Past Bound from the first request the eviction goes through
// anyway, to the PodDisruptionBudget, which still guards quorum: a drain never hangs on Steward.
//
// Decide is pure, so what the webhook answers is table-testable.
package eviction

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
)

const (
	// DefaultBound is how long after the first request an eviction waits for its member to be
	// prepared before it is let through to the PodDisruptionBudget.
	DefaultBound = 2 * time.Minute
	// RequestLifetime is how long a recorded request counts: the planner prepares a member only for
	// a live request, and a prepared member whose eviction never came (the drain was stopped) goes
	// back into the client Service after it. A request after it starts a new bound.
	RequestLifetime = 10 * time.Minute
)

// Facts are what the webhook read for one eviction request.
type Facts struct {
	// Member names the member whose Pod is to be evicted; "" when the Pod is no Steward member's.
	Member string
	// RequestedAt is the request recorded on the Pod; zero when none is.
	RequestedAt time.Time
	// Prepared: the Pod is marked prepared for this request (AnnotationEvictionPrepared).
	Prepared bool
	// Leader: the member's EtcdMember says it leads.
	Leader bool
	// AddFirst: the member is replaced add-first (a memory member with a surge: its successor joins
	// and votes, then Steward removes it and deletes its Pod, which ends the eviction).
	AddFirst bool
	// Others are the cluster's other members.
	Others []Other
	Now    time.Time
	// Bound is how long to wait for the preparation (DefaultBound when zero).
	Bound time.Duration
}

// Other is another member of the same cluster, as its Pod shows it.
type Other struct {
	Name string
	// Down: its Pod is missing, terminating or not ready.
	Down bool
	// Evicting: it is prepared for an eviction of its own.
	Evicting bool
}

// Answer is the webhook's answer.
type Answer struct {
	Allowed bool
	// Record: write Now as the request on the Pod (none live was recorded) before answering.
	Record bool
	// Message says why; for a refusal, what the eviction waits for.
	Message string
}

// Live says whether a request recorded at at still counts at now.
func Live(at, now time.Time) bool {
	return !at.IsZero() && now.Sub(at) < RequestLifetime && !at.After(now.Add(time.Minute))
}

// Decide answers one eviction request.
func Decide(f Facts) Answer {
	if f.Member == "" {
		return Answer{Allowed: true, Message: "not a Steward member's Pod"}
	}
	bound := f.Bound
	if bound <= 0 {
		bound = DefaultBound
	}
	at, record := f.RequestedAt, false
	if !Live(at, f.Now) {
		at, record = f.Now, true
	}
	if f.Prepared && !record && !f.Leader {
		return Answer{Allowed: true, Message: fmt.Sprintf("%s is prepared: leadership moved off it and it left the client Service", f.Member)}
	}
	waited := f.Now.Sub(at)
	if waited >= bound {
		return Answer{Allowed: true, Record: record, Message: fmt.Sprintf(
			"%s was not prepared within %s: the PodDisruptionBudget decides", f.Member, bound)}
	}
	return Answer{Record: record, Message: fmt.Sprintf(
		"Steward prepares etcd member %s for its eviction: %s; retry (after %s more the PodDisruptionBudget decides)",
		f.Member, waitingFor(f), (bound - waited).Round(time.Second))}
}

// waitingFor says what a refused eviction waits for.
func waitingFor(f Facts) string {
	var down, evicting []string
	for _, o := range f.Others {
		switch {
		case o.Evicting:
			evicting = append(evicting, o.Name)
		case o.Down:
			down = append(down, o.Name)
		}
	}
	switch {
	case f.AddFirst && len(evicting) == 0:
		// A joining successor is not ready yet: it is what the eviction waits for, not a repair.
		return "replacing it add-first (a memory member, spec.updateStrategy.maxSurge): its successor joins and votes, " +
			"then Steward removes it and deletes its Pod"
	case len(evicting) > 0:
		return fmt.Sprintf("waiting until %s, prepared first, is evicted and back (one member at a time)", strings.Join(evicting, ", "))
	case len(down) > 0:
		return fmt.Sprintf("waiting until %s is healthy again (repairs come first; one member at a time)", strings.Join(down, ", "))
	case f.Prepared && f.Leader:
		return "it leads again; moving leadership off it"
	default:
		return "moving leadership off it and taking it out of the client Service"
	}
}

// RequestedAt is the request recorded on the Pod; zero when none or unreadable.
func RequestedAt(p *corev1.Pod) time.Time {
	t, err := time.Parse(time.RFC3339Nano, p.Annotations[stewardv1.AnnotationEvictionRequested])
	if err != nil {
		return time.Time{}
	}
	return t
}

// Marked says whether the Pod is marked prepared and still out of the client Service.
func Marked(p *corev1.Pod) bool {
	return p.Annotations[stewardv1.AnnotationEvictionPrepared] != "" && p.Labels[stewardv1.LabelVoter] == resources.VoterDraining
}

// Prepared says whether the Pod is prepared for its live eviction request.
func Prepared(p *corev1.Pod, now time.Time) bool {
	return Marked(p) && Live(RequestedAt(p), now)
}
