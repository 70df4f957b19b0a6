// Package evidence judges what etcd itself, and the kubelets that run its members, show about the
// cluster, before Steward takes a destructive step on it (docs/design.md, invariant 6: what the
// operator cannot reach is not what etcd lost). It is pure: the controller gathers the facts, these
// functions say what they prove, and an absence of facts proves nothing.
package evidence

import (
	"fmt"
	"strings"
)

// Voter is what was seen of one voting member in one reconcile.
type Voter struct {
	Name string
	// Answered: its etcd answered a Status call. Err says why not.
	Answered bool
	Err      string
	// HasLeader: it answered naming a leader. etcd runs raft with CheckQuorum and PreVote: a leader
	// cut off from a quorum steps down, and a follower that hears no leader for an election
	// timeout forgets it, so a named leader means a quorum was there moments ago.
	HasLeader bool
	// ReadOK: a linearizable read through it succeeded, which needs a quorum now.
	ReadOK bool
	// ContainerDown: the kubelet of a Ready node reports the member's etcd container not running
	// (waiting, backing off, terminated). A NotReady node's report is stale and does not count.
	ContainerDown bool
	// DataGone says why the member's data is gone ("" when it is not known to be): the data check
	// refused its directory, or its PVC (or, for memory storage, its Pod) is gone.
	DataGone string
	// NodeGone: its Node was deleted or tainted node.kubernetes.io/out-of-service.
	NodeGone bool
}

// lost says why the voter cannot be part of a quorum now, or "" when nothing shows it.
func (v Voter) lost() string {
	switch {
	case v.DataGone != "":
		return "its data is gone (" + v.DataGone + ")"
	case v.NodeGone:
		return "its node is gone or out of service"
	case v.ContainerDown:
		return "the kubelet of its Ready node reports its etcd container not running"
	case v.Answered && !v.HasLeader && !v.ReadOK:
		return "it answers without a leader and fails a linearizable read"
	}
	return ""
}

// State is what the evidence shows about quorum.
type State string

const (
	// Held: etcd itself shows a quorum (a member answers with a leader, or a read succeeds).
	Held State = "Held"
	// Lost: a strict majority of voters each shows positive evidence it cannot be in a quorum.
	Lost State = "Lost"
	// Unknown: neither; some voters did not answer. Silence proves nothing either way.
	Unknown State = "Unknown"
)

// Quorum is the verdict with what it rests on.
type Quorum struct {
	State State
	// Proof names the member whose answer shows quorum (Held).
	Proof string
	// Lost are the voters with positive evidence, each with why (Voter.lost), by name.
	Lost map[string]string
	// Unreachable are the voters that did not answer and show nothing else, with the error.
	Unreachable map[string]string
	// Voters is how many voters were judged.
	Voters int
}

// JudgeQuorum says whether etcd has quorum, from the voters' evidence. Any member answering with a
// leader, or any linearizable read, proves quorum. Quorum is lost only when more than half of all
// voters (not of those that answered) each show they cannot take part in one.
func JudgeQuorum(voters []Voter) Quorum {
	q := Quorum{State: Unknown, Lost: map[string]string{}, Unreachable: map[string]string{}, Voters: len(voters)}
	for _, v := range voters {
		if why := v.lost(); why != "" {
			q.Lost[v.Name] = why
		} else if !v.Answered {
			q.Unreachable[v.Name] = firstNonEmpty(v.Err, "no answer")
		}
	}
	for _, v := range voters {
		switch {
		case v.Answered && v.ReadOK:
			q.State, q.Proof = Held, v.Name+" serves a linearizable read"
			return q
		case v.Answered && v.HasLeader:
			q.State, q.Proof = Held, v.Name+" answers with a leader"
			return q
		}
	}
	if len(voters) > 0 && len(q.Lost) > len(voters)/2 {
		q.State = Lost
	}
	return q
}

// Summary describes the verdict for humans, naming members in order.
func (q Quorum) Summary(order []string) string {
	var s string
	switch q.State {
	case Held:
		s = "etcd shows quorum: " + q.Proof
	case Lost:
		s = fmt.Sprintf("quorum lost: %d of %d voters cannot take part in one: %s", len(q.Lost), q.Voters, list(q.Lost, order))
	default:
		s = fmt.Sprintf("quorum unknown: %d of %d voters show they cannot take part in one", len(q.Lost), q.Voters)
		if len(q.Lost) > 0 {
			s += " (" + list(q.Lost, order) + ")"
		}
	}
	if names := q.UnreachableNames(order); len(names) > 0 {
		s += "; the operator cannot reach " + byError(q.Unreachable, names)
	}
	return s
}

// UnreachableNames are the unreachable voters' names, in the given order.
func (q Quorum) UnreachableNames(order []string) []string {
	var out []string
	for _, n := range order {
		if _, ok := q.Unreachable[n]; ok {
			out = append(out, n)
		}
	}
	return out
}

func list(m map[string]string, order []string) string {
	var parts []string
	for _, n := range order {
		if why, ok := m[n]; ok {
			parts = append(parts, n+": "+why)
		}
	}
	return strings.Join(parts, "; ")
}

// byError names the members, then their errors: "a, b (timeout)" when they share one, and
// "a, b (a: refused; b: timeout)" otherwise (errors often name each member's own address).
func byError(errs map[string]string, names []string) string {
	same := true
	for _, n := range names {
		same = same && errs[n] == errs[names[0]]
	}
	if same {
		return strings.Join(names, ", ") + " (" + errs[names[0]] + ")"
	}
	var each []string
	for _, n := range names {
		each = append(each, n+": "+errs[n])
	}
	return strings.Join(names, ", ") + " (" + strings.Join(each, "; ") + ")"
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
