package evidence

import (
	"fmt"
	"time"
)

// Node is what was read of one Kubernetes Node. Known is false when it could not be read: that
// proves nothing either way.
type Node struct {
	Name  string
	Known bool
	// Deleted: the Node object is gone.
	Deleted bool
	// Ready is its Ready condition, NotReadySince when that last turned False or Unknown.
	Ready         bool
	NotReadySince time.Time
	// Cordoned: spec.unschedulable. OutOfService: tainted node.kubernetes.io/out-of-service, an
	// administrator's word that the node is shut down for good.
	Cordoned     bool
	OutOfService bool
}

// gone: the node is deleted or declared gone for good.
func (n Node) gone() bool { return n.Known && (n.Deleted || n.OutOfService) }

// PeerView is etcd's own view of a member: whether the leader has an active connection to it
// (its etcd_network_active_peers gauge). Known is false when the leader's view was not read.
type PeerView struct {
	Known  bool
	Active bool
}

// MemberNodes is what one reconcile saw of a member's node, its volume's node and etcd's view.
type MemberNodes struct {
	Name string
	// Node is the node its Pod is bound to; Name "" when none.
	Node Node
	// Volume is the one node its volume is pinned to (node-local storage); nil when the volume
	// follows the Pod (network-attached, or memory).
	Volume *Node
	// PodRunning: its Pod is bound to a node and not on its way out (a Pod evicted by a drain,
	// or Pending for a cordoned volume node, is not).
	PodRunning bool
	Peer       PeerView
	// UnheardSince is since when the operator has seen the leader without a connection to it;
	// CordonedSince since when it has seen the relevant node cordoned. Zero when not.
	UnheardSince, CordonedSince time.Time
}

// LossKind is what a member's node evidence amounts to.
type LossKind string

const (
	// NoLoss: nothing shows the member lost with a node.
	NoLoss LossKind = ""
	// NodeLost: its node is not Ready, deleted or out of service, and etcd's leader does not hear it.
	NodeLost LossKind = "NodeLost"
	// VolumeNodeGone: its volume is pinned to a deleted (or out-of-service) node: the data is gone.
	VolumeNodeGone LossKind = "VolumeNodeGone"
	// VolumeNodeCordoned: its volume is pinned to a cordoned node and its Pod cannot run.
	VolumeNodeCordoned LossKind = "VolumeNodeCordoned"
	// NodeDeletedHeard: its Node was deleted while etcd still hears the member: an
	// administrator's act, not a loss. Steward waits.
	NodeDeletedHeard LossKind = "NodeDeletedHeard"
	// Unproven: the nodes show a loss, but etcd's view could not be read: nothing is done.
	Unproven LossKind = "Unproven"
)

// Settings are spec.nodeLoss with its defaults.
type Settings struct {
	ReplaceAfter, CordonedReplaceAfter time.Duration
}

// NodeLoss is the verdict on one member.
type NodeLoss struct {
	Kind LossKind
	// Node is the node the verdict is about (the Pod's, or the volume's).
	Node string
	// Why says what the evidence is, for status and events.
	Why string
	// Due is when the member may be replaced; zero when it may not (NoLoss, NodeDeletedHeard,
	// Unproven).
	Due time.Time
}

// Replaceable: the member may be replaced at now.
func (l NodeLoss) Replaceable(now time.Time) bool { return !l.Due.IsZero() && !now.Before(l.Due) }

// Waiting says what a replacement still waits for at now, or "" when it is due or there is none.
func (l NodeLoss) Waiting(now time.Time) string {
	switch {
	case l.Kind == NoLoss:
		return ""
	case l.Due.IsZero():
		return l.Why
	case now.Before(l.Due):
		return fmt.Sprintf("%s; replacing it at %s unless that ends", l.Why, l.Due.UTC().Format(time.RFC3339))
	}
	return ""
}

// JudgeNodeLoss says whether a member is lost with its node, on etcd's own evidence (the leader
// does not hear it) together with the nodes' (not Ready, deleted, out of service, or a node-local
// volume's node deleted or cordoned), and from when a replacement is due: the evidence must have
// held, without a break, for the setting. What the operator itself can reach plays no part.
func JudgeNodeLoss(m MemberNodes, s Settings) NodeLoss {
	l := nodeEvidence(m)
	if l.Kind == NoLoss {
		return l
	}
	switch {
	case !m.Peer.Known:
		return NodeLoss{Kind: Unproven, Node: l.Node, Why: l.Why + ", but etcd's leader's view of " + m.Name +
			" could not be read: Steward replaces a member only on etcd's evidence"}
	case m.Peer.Active && l.Kind == NodeLost && m.Node.Deleted:
		return NodeLoss{Kind: NodeDeletedHeard, Node: l.Node, Why: fmt.Sprintf("node %s was deleted while etcd's leader still "+
			"hears %s: an administrator's act, not a loss; waiting", l.Node, m.Name)}
	case m.Peer.Active:
		return NodeLoss{} // etcd hears it: whatever the node says, the member is not lost
	case m.UnheardSince.IsZero():
		return NodeLoss{Kind: Unproven, Node: l.Node, Why: l.Why + " and etcd's leader does not hear it (just seen)"}
	}
	l.Why += " and etcd's leader has not heard from it since " + m.UnheardSince.UTC().Format(time.RFC3339)
	unheard := m.UnheardSince.Add(s.ReplaceAfter)
	switch {
	case l.Kind == VolumeNodeCordoned:
		l.Due = latest(unheard, m.CordonedSince.Add(s.CordonedReplaceAfter))
	case (l.Kind == NodeLost && m.Node.OutOfService) || (l.Kind == VolumeNodeGone && m.Volume.OutOfService):
		l.Due = m.UnheardSince // gone for good by its administrator's word
	case l.Kind == NodeLost && !m.Node.Deleted:
		l.Due = latest(unheard, m.Node.NotReadySince.Add(s.ReplaceAfter))
	default:
		l.Due = unheard
	}
	return l
}

// NodesShowLoss: the nodes alone (before etcd's view is asked) show the member lost, or its
// volume's node cordoned while its Pod cannot run. Only then are etcd's silence and a cordon timed.
func NodesShowLoss(m MemberNodes) bool {
	m.CordonedSince = time.Unix(1, 0) // a cordon counts here whether or not it was timed yet
	return nodeEvidence(m).Kind != NoLoss
}

// nodeEvidence is what the nodes alone show, before etcd's view is asked.
func nodeEvidence(m MemberNodes) NodeLoss {
	if v := m.Volume; v != nil && !m.PodRunning {
		switch {
		case v.gone():
			return NodeLoss{Kind: VolumeNodeGone, Node: v.Name, Why: fmt.Sprintf("%s's volume is bound to node %s, which is %s",
				m.Name, v.Name, goneWord(*v))}
		case v.Known && v.Cordoned && !m.CordonedSince.IsZero():
			return NodeLoss{Kind: VolumeNodeCordoned, Node: v.Name, Why: fmt.Sprintf("%s's volume is bound to node %s, cordoned "+
				"since %s (an administrator's intent), so its Pod cannot run", m.Name, v.Name, m.CordonedSince.UTC().Format(time.RFC3339))}
		}
	}
	n := m.Node
	switch {
	case n.Name == "" || !n.Known:
		return NodeLoss{}
	case n.gone():
		return NodeLoss{Kind: NodeLost, Node: n.Name, Why: fmt.Sprintf("%s's node %s is %s", m.Name, n.Name, goneWord(n))}
	case !n.Ready:
		return NodeLoss{Kind: NodeLost, Node: n.Name, Why: fmt.Sprintf("%s's node %s is not Ready", m.Name, n.Name)}
	}
	return NodeLoss{}
}

func goneWord(n Node) string {
	if n.Deleted {
		return "deleted"
	}
	return "out of service (tainted node.kubernetes.io/out-of-service)"
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
