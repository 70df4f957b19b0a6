package evidence

import (
	"strings"
	"testing"
	"time"
)

var (
	t0       = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	settings = Settings{ReplaceAfter: 3 * time.Minute, CordonedReplaceAfter: 30 * time.Minute}
	unheard  = PeerView{Known: true}
	heard    = PeerView{Known: true, Active: true}
)

func ready(name string) Node    { return Node{Name: name, Known: true, Ready: true} }
func notReady(name string) Node { return Node{Name: name, Known: true, NotReadySince: t0} }
func deleted(name string) Node  { return Node{Name: name, Known: true, Deleted: true} }
func cordoned(name string) *Node {
	return &Node{Name: name, Known: true, Ready: true, Cordoned: true}
}

func TestJudgeNodeLoss(t *testing.T) {
	tests := []struct {
		name string
		m    MemberNodes
		kind LossKind
		node string
		due  time.Time // zero: never replaceable on this evidence
		why  string    // a fragment of Why
	}{
		{name: "a Ready node, the leader hears it", m: MemberNodes{Node: ready("n1"), PodRunning: true, Peer: heard}},
		{name: "a Ready node the leader does not hear: the node is fine, etcd is not: not this rule",
			m: MemberNodes{Node: ready("n1"), PodRunning: true, Peer: unheard, UnheardSince: t0}},
		{name: "NotReady, but the leader hears it: a kubelet problem, not a loss",
			m: MemberNodes{Node: notReady("n1"), PodRunning: true, Peer: heard}},
		{name: "NotReady and unheard: due once both held for the setting",
			m:    MemberNodes{Node: notReady("n1"), PodRunning: true, Peer: unheard, UnheardSince: t0.Add(time.Minute)},
			kind: NodeLost, node: "n1", due: t0.Add(4 * time.Minute), why: "not Ready"},
		{name: "NotReady long before etcd lost it: the later start counts",
			m:    MemberNodes{Node: Node{Name: "n1", Known: true, NotReadySince: t0.Add(-time.Hour)}, Peer: unheard, UnheardSince: t0},
			kind: NodeLost, node: "n1", due: t0.Add(3 * time.Minute)},
		{name: "NotReady, unheard just now: not proven for any time yet",
			m: MemberNodes{Node: notReady("n1"), Peer: unheard}, kind: Unproven, node: "n1", why: "just seen"},
		{name: "NotReady, the leader's view unreadable: fails closed",
			m: MemberNodes{Node: notReady("n1"), Peer: PeerView{}, UnheardSince: t0}, kind: Unproven, node: "n1", why: "could not be read"},
		{name: "a Node that could not be read proves nothing",
			m: MemberNodes{Node: Node{Name: "n1"}, Peer: unheard, UnheardSince: t0}},
		{name: "a Pod on no node: nothing about nodes",
			m: MemberNodes{Peer: unheard, UnheardSince: t0}},
		{name: "the Node deleted while the leader hears the member: an administrator's act",
			m:    MemberNodes{Node: deleted("n1"), PodRunning: true, Peer: heard},
			kind: NodeDeletedHeard, node: "n1", why: "administrator's act"},
		{name: "the Node deleted and unheard", m: MemberNodes{Node: deleted("n1"), Peer: unheard, UnheardSince: t0},
			kind: NodeLost, node: "n1", due: t0.Add(3 * time.Minute), why: "deleted"},
		{name: "out of service and unheard: at once, by the administrator's word",
			m:    MemberNodes{Node: Node{Name: "n1", Known: true, OutOfService: true}, Peer: unheard, UnheardSince: t0},
			kind: NodeLost, node: "n1", due: t0, why: "out-of-service"},
		{name: "out of service but heard: not lost",
			m: MemberNodes{Node: Node{Name: "n1", Known: true, Ready: true, OutOfService: true}, PodRunning: true, Peer: heard}},
		{name: "a volume on a deleted node, the Pod Pending",
			m:    MemberNodes{Volume: &Node{Name: "n1", Known: true, Deleted: true}, Peer: unheard, UnheardSince: t0},
			kind: VolumeNodeGone, node: "n1", due: t0.Add(3 * time.Minute), why: "volume is bound to node n1, which is deleted"},
		{name: "a volume on an out-of-service node: at once",
			m:    MemberNodes{Volume: &Node{Name: "n1", Known: true, OutOfService: true}, Peer: unheard, UnheardSince: t0},
			kind: VolumeNodeGone, node: "n1", due: t0},
		{name: "a volume on a cordoned node, the Pod evicted: due after the cordon setting",
			m:    MemberNodes{Volume: cordoned("n1"), Peer: unheard, UnheardSince: t0, CordonedSince: t0},
			kind: VolumeNodeCordoned, node: "n1", due: t0.Add(30 * time.Minute), why: "administrator's intent"},
		{name: "cordoned long ago, unheard since a moment: the unheard setting too",
			m:    MemberNodes{Volume: cordoned("n1"), Peer: unheard, UnheardSince: t0, CordonedSince: t0.Add(-time.Hour)},
			kind: VolumeNodeCordoned, node: "n1", due: t0.Add(3 * time.Minute)},
		{name: "a cordon not recorded yet is not timed",
			m: MemberNodes{Volume: cordoned("n1"), Peer: unheard, UnheardSince: t0}},
		{name: "a cordoned volume node while the Pod still runs there: a drain is the admin's, not a loss",
			m: MemberNodes{Node: ready("n1"), Volume: cordoned("n1"), PodRunning: true, Peer: heard, CordonedSince: t0}},
		{name: "a volume that follows the Pod: a cordon or a deleted node says nothing about the data",
			m: MemberNodes{Node: Node{}, Peer: unheard, UnheardSince: t0, CordonedSince: t0}},
		{name: "the volume's node deleted, but the leader hears the member: not lost",
			m: MemberNodes{Volume: &Node{Name: "n1", Known: true, Deleted: true}, Peer: heard}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.m.Name = "m"
			got := JudgeNodeLoss(tt.m, settings)
			if got.Kind != tt.kind || got.Node != tt.node || !got.Due.Equal(tt.due) {
				t.Fatalf("got %s on %q due %v (%s), want %s on %q due %v", got.Kind, got.Node, got.Due, got.Why, tt.kind, tt.node, tt.due)
			}
			if !strings.Contains(got.Why, tt.why) {
				t.Errorf("why %q, want it to say %q", got.Why, tt.why)
			}
		})
	}
}

func TestNodeLossReplaceableAndWaiting(t *testing.T) {
	l := JudgeNodeLoss(MemberNodes{Name: "m", Node: notReady("n1"), Peer: unheard, UnheardSince: t0}, settings)
	if l.Replaceable(t0.Add(2*time.Minute)) || !l.Replaceable(t0.Add(3*time.Minute)) {
		t.Errorf("due %v: replaceable before or not at it", l.Due)
	}
	if w := l.Waiting(t0.Add(time.Minute)); !strings.Contains(w, "replacing it at 2030-01-01T12:03:00Z") {
		t.Errorf("waiting %q, want it to say when", w)
	}
	if w := l.Waiting(t0.Add(3 * time.Minute)); w != "" {
		t.Errorf("waiting %q once due", w)
	}
	held := JudgeNodeLoss(MemberNodes{Name: "m", Node: deleted("n1"), Peer: heard}, settings)
	if held.Replaceable(t0.Add(time.Hour)) || held.Waiting(t0) == "" {
		t.Errorf("a deleted node etcd still hears: replaceable %v, waiting %q", held.Replaceable(t0.Add(time.Hour)), held.Waiting(t0))
	}
	if (NodeLoss{}).Waiting(t0) != "" || (NodeLoss{}).Replaceable(t0) {
		t.Error("no loss waits for nothing and replaces nothing")
	}
}

// Property: whatever the nodes say, a member the leader hears, or whose leader's view is unknown,
// is never replaceable; and nothing is replaceable before the leader has been silent for the setting
// (out of service excepted, which needs the silence seen at least once).
func TestNodeLossNeedsEtcdsEvidence(t *testing.T) {
	nodes := []Node{{}, {Name: "n", Known: true}, ready("n"), notReady("n"), deleted("n"), {Name: "n", Known: true, OutOfService: true}}
	vols := []*Node{nil, cordoned("v"), {Name: "v", Known: true, Deleted: true}, {Name: "v", Known: true, OutOfService: true}}
	for _, n := range nodes {
		for _, v := range vols {
			for _, running := range []bool{false, true} {
				for _, peer := range []PeerView{{}, heard, unheard} {
					m := MemberNodes{Name: "m", Node: n, Volume: v, PodRunning: running, Peer: peer, UnheardSince: t0, CordonedSince: t0}
					l := JudgeNodeLoss(m, settings)
					if (peer != unheard) && !l.Due.IsZero() {
						t.Errorf("%+v: due %v without etcd's evidence", m, l.Due)
					}
					if !l.Due.IsZero() && l.Due.Before(t0.Add(settings.ReplaceAfter)) && !n.OutOfService && (v == nil || !v.OutOfService) {
						t.Errorf("%+v: due %v before the leader was silent for the setting", m, l.Due)
					}
				}
			}
		}
	}
}
