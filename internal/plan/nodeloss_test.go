package plan

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/evidence"
)

const observer = "operator-a"

// nodeDown makes a member's node NotReady (for an hour) and etcd's leader not hear it, with the
// silence recorded by this operator process ago.
func (f *Facts) nodeDown(name string, ago time.Duration) {
	f.Observer = observer
	m := f.m(name)
	m.Pod.Ready, m.Pod.NotReadySince = false, f.Now.Add(-time.Hour)
	m.Nodes = NodeFacts{Pod: evidence.Node{Name: "node-" + name, Known: true, NotReadySince: f.Now.Add(-time.Hour)},
		Peer: evidence.PeerView{Known: true}}
	f.silence(name)
	f.recordUnheard(name, "node-"+name, ago)
}

func (f *Facts) recordUnheard(name, node string, ago time.Duration) {
	since := metav1.NewTime(f.Now.Add(-ago))
	f.Cluster.Status.NodeLoss = append(f.Cluster.Status.NodeLoss,
		stewardv1.MemberNodeLoss{Member: name, Node: node, UnheardSince: &since, Observer: observer})
}

// volumeCordoned pins a member's volume to a cordoned node (cordoned since ago) and evicts its Pod:
// Pending, unschedulable, unheard since unheard ago.
func (f *Facts) volumeCordoned(name string, ago, unheard time.Duration) {
	f.Observer = observer
	m := f.m(name)
	m.Pod = Pod{Exists: true, Phase: corev1.PodPending, Unschedulable: true, NotReadySince: f.Now.Add(-unheard)}
	m.Nodes = NodeFacts{Volume: &evidence.Node{Name: "node-v", Known: true, Ready: true, Cordoned: true},
		Peer: evidence.PeerView{Known: true}}
	f.silence(name)
	f.recordUnheard(name, "node-v", unheard)
	since := metav1.NewTime(f.Now.Add(-ago))
	f.Cluster.Status.NodeLoss[len(f.Cluster.Status.NodeLoss)-1].CordonedSince = &since
}

// replacedElsewhere records c-2 as removed for a node loss and out of etcd, its Pod terminating.
func (f *Facts) replacedElsewhere(name string) {
	f.m(name).Phase, f.m(name).Replacing, f.m(name).ReplacedElsewhere = stewardv1.MemberRemoving, true, "NodeLost: node gone"
	f.dropLive(name)
	f.m(name).Pod.Deleting, f.m(name).Pod.DeletingSince = true, f.Now.Add(-time.Hour)
}

// The leader's view is read only when some member's nodes show it lost: its Node not Ready, gone
// or out of service, or, for a Pod that does not run, its volume's node gone or cordoned.
func TestPeerViewNeeded(t *testing.T) {
	ready := evidence.Node{Name: "n", Known: true, Ready: true}
	running := Pod{Exists: true, Phase: corev1.PodRunning}
	pending := Pod{Exists: true, Phase: corev1.PodPending}
	for _, tc := range []struct {
		name string
		m    Member
		want bool
	}{
		{"node Ready", Member{Pod: running, Nodes: NodeFacts{Pod: ready}}, false},
		{"no node yet", Member{Pod: pending}, false},
		{"node not read", Member{Pod: running, Nodes: NodeFacts{Pod: evidence.Node{Name: "n"}}}, false},
		{"node not Ready", Member{Pod: running, Nodes: NodeFacts{Pod: evidence.Node{Name: "n", Known: true}}}, true},
		{"node deleted", Member{Pod: running, Nodes: NodeFacts{Pod: evidence.Node{Name: "n", Known: true, Deleted: true}}}, true},
		{"node out of service", Member{Pod: running, Nodes: NodeFacts{Pod: evidence.Node{Name: "n", Known: true, Ready: true, OutOfService: true}}}, true},
		{"volume's node cordoned, Pod pending", Member{Pod: pending,
			Nodes: NodeFacts{Volume: &evidence.Node{Name: "v", Known: true, Ready: true, Cordoned: true}}}, true},
		{"volume's node cordoned, Pod running there", Member{Pod: running,
			Nodes: NodeFacts{Pod: ready, Volume: &evidence.Node{Name: "n", Known: true, Ready: true, Cordoned: true}}}, false},
		{"volume's node deleted, Pod pending", Member{Pod: pending,
			Nodes: NodeFacts{Volume: &evidence.Node{Name: "v", Known: true, Deleted: true}}}, true},
		{"volume's node not read", Member{Pod: pending, Nodes: NodeFacts{Volume: &evidence.Node{Name: "v"}}}, false},
	} {
		well := Member{Name: "a", Pod: running, Nodes: NodeFacts{Pod: ready}}
		tc.m.Name = "b"
		if got := PeerViewNeeded([]Member{well, tc.m}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if PeerViewNeeded(nil) {
		t.Error("no members: a view read")
	}
}

func TestPlanNodeLoss(t *testing.T) {
	runPlanCases(t, []planCase{
		{name: "NotReady and unheard for the setting: removed first, to be replaced elsewhere",
			mutate: func(f *Facts) { f.nodeDown("c-2", 4*time.Minute) },
			want: want{kind: RemoveMember, member: "c-2", reason: ReasonMemberNodeLost, disruption: disruption.ReplaceLost,
				message: "not Ready"}},
		{name: "unheard for a minute: waits, saying until when",
			mutate: func(f *Facts) { f.nodeDown("c-2", time.Minute) },
			want:   want{kind: Wait, reason: ReasonWaitingForNodeLoss, message: "replacing it at"}},
		{name: "a clock another operator process started counts for nothing",
			mutate: func(f *Facts) { f.nodeDown("c-2", time.Hour); f.Observer = "operator-b" },
			want:   want{kind: Wait, reason: ReasonWaitingForNodeLoss}},
		{name: "NotReady, but the leader hears it: no replacement",
			mutate: func(f *Facts) { f.nodeDown("c-2", time.Hour); f.m("c-2").Nodes.Peer.Active = true },
			want:   want{kind: Wait, reason: ReasonWaitingForHealth}},
		{name: "the leader's view unread: fails closed",
			mutate: func(f *Facts) { f.nodeDown("c-2", time.Hour); f.m("c-2").Nodes.Peer = evidence.PeerView{} },
			want:   want{kind: Wait, reason: ReasonWaitingForNodeLoss, message: "could not be read"}},
		{name: "the rest not healthy: the chokepoint waits",
			mutate: func(f *Facts) { f.nodeDown("c-2", time.Hour); f.m("c-1").Pod.Ready = false },
			want:   want{kind: Wait, reason: ReasonWaitingForHealth, message: "c-1"}},
		{name: "two lost of five: one at a time", n: 5,
			mutate: func(f *Facts) { f.nodeDown("c-3", time.Hour); f.nodeDown("c-4", time.Hour) },
			want:   want{kind: Wait, reason: ReasonWaitingForHealth}},
		{name: "its Pod evicted and stuck Terminating: replaced, no force-delete asked for",
			mutate: func(f *Facts) {
				f.nodeDown("c-2", time.Hour)
				f.m("c-2").Pod.Deleting, f.m("c-2").Pod.DeletingSince = true, f.Now.Add(-time.Hour)
			},
			want: want{kind: RemoveMember, member: "c-2", reason: ReasonMemberNodeLost, disruption: disruption.ReplaceLost}},
		{name: "the Node deleted while etcd hears the member: an administrator's act, waits",
			mutate: func(f *Facts) {
				f.m("c-2").Nodes = NodeFacts{Pod: evidence.Node{Name: "n", Known: true, Deleted: true},
					Peer: evidence.PeerView{Known: true, Active: true}}
			},
			want: want{kind: Wait, reason: ReasonWaitingForNodeLoss, message: "administrator's act"}},
		{name: "out of service: replaced as soon as the leader's silence is seen",
			mutate: func(f *Facts) {
				f.nodeDown("c-2", 0)
				f.m("c-2").Nodes.Pod.OutOfService = true
			},
			want: want{kind: RemoveMember, member: "c-2", disruption: disruption.ReplaceLost, message: "out-of-service"}},
		{name: "a volume's node cordoned past the setting, the Pod evicted: replaced",
			mutate: func(f *Facts) { f.volumeCordoned("c-1", 31*time.Minute, 31*time.Minute) },
			want:   want{kind: RemoveMember, member: "c-1", disruption: disruption.ReplaceLost, message: "cordoned"}},
		{name: "a volume's node cordoned ten minutes: the admin's intent, waits",
			mutate: func(f *Facts) { f.volumeCordoned("c-1", 10*time.Minute, 10*time.Minute) },
			want:   want{kind: Wait, reason: ReasonWaitingForNodeLoss, message: "an administrator's intent"}},
		{name: "a volume that follows the Pod: a Pending Pod is only unschedulable",
			mutate: func(f *Facts) {
				f.volumeCordoned("c-1", time.Hour, time.Hour)
				f.m("c-1").Nodes.Volume = nil
			},
			want: want{kind: Wait, reason: ReasonWaitingForHealth}},
		{name: "another member down too: no membership change without a quorum the operator sees",
			mutate: func(f *Facts) { f.nodeDown("c-2", time.Hour); f.podGone("c-1"); f.m("c-1").PVC = PVC{} },
			want:   want{kind: Wait, reason: ReasonMembersUnreachable}},
		{name: "a lost leader hands over first",
			mutate: func(f *Facts) { f.nodeDown("c-1", time.Hour); f.lead("c-1") },
			want:   want{kind: MoveLeader, member: "c-1", target: "c-0"}},
	})
}

func TestPlanReplacedElsewhere(t *testing.T) {
	runPlanCases(t, []planCase{
		{name: "intent written, still in etcd, the evidence holds: remove it, re-checked",
			mutate: func(f *Facts) {
				f.nodeDown("c-2", time.Hour)
				f.m("c-2").Phase, f.m("c-2").ReplacedElsewhere = stewardv1.MemberRemoving, "NodeLost"
			},
			want: want{kind: RemoveMember, member: "c-2", reason: ReasonMemberNodeLost, disruption: disruption.ReplaceLost}},
		{name: "intent written, the node came back before the removal: withdrawn",
			mutate: func(f *Facts) {
				f.m("c-2").Phase, f.m("c-2").ReplacedElsewhere = stewardv1.MemberRemoving, "NodeLost"
			},
			want: want{kind: RecordPhase, member: "c-2", reason: ReasonNodeLossWithdrawn}},
		{name: "out of etcd, its Pod still there: deleted, not waited for",
			mutate: func(f *Facts) {
				f.replacedElsewhere("c-2")
				f.m("c-2").Pod.Deleting = false
			},
			want: want{kind: DeletePod, member: "c-2", reason: ReasonCleaningUp, disruption: disruption.Restart}},
		{name: "out of etcd, its Pod Terminating on the lost node: the successor under a new name",
			mutate: func(f *Facts) { f.replacedElsewhere("c-2") },
			want:   want{kind: CreateMember, member: "c-3", reason: ReasonReplacingElsewhere, message: "replace c-2"}},
		{name: "an ordinal a detached PVC holds is skipped",
			mutate: func(f *Facts) { f.replacedElsewhere("c-2"); f.ReservedOrdinals = []int32{3} },
			want:   want{kind: CreateMember, member: "c-4", reason: ReasonReplacingElsewhere}},
		{name: "the successor exists: the member is detached, its PVC kept",
			mutate: func(f *Facts) { f.replacedElsewhere("c-2"); f.newMember(3, stewardv1.MemberPending) },
			want:   want{kind: DetachMember, member: "c-2", reason: ReasonReplacingElsewhere, message: "PVC is kept"}},
		{name: "detached: the successor joins as a learner",
			mutate: func(f *Facts) {
				f.replacedElsewhere("c-2")
				f.Members = f.Members[:2]
				f.newMember(3, stewardv1.MemberPending)
				f.ReservedOrdinals = []int32{2}
			},
			want: want{kind: AddLearner, member: "c-3", reason: ReasonJoiningMember}},
	})
}

// The successor is created even when a roll is due: the replacement is a repair, before any roll.
func TestNodeLossReplacementComesBeforeARoll(t *testing.T) {
	d := planFor(t, 3, "", func(f *Facts) {
		f.replacedElsewhere("c-2")
		f.retarget(cpu("2"))
	})
	checkAction(t, d, want{kind: CreateMember, member: "c-3", reason: ReasonReplacingElsewhere})
}

// status.nodeLoss: the clocks are kept by the process that started them, cleared when the evidence
// goes, and a cordon is timed from when Steward first saw it, per node.
func TestNodeLossRecords(t *testing.T) {
	d := planFor(t, 3, "", func(f *Facts) { f.nodeDown("c-2", 2*time.Minute) })
	if len(d.NodeLoss) != 1 || d.NodeLoss[0].Member != "c-2" || d.NodeLoss[0].Observer != observer ||
		d.NodeLoss[0].UnheardSince == nil || d.NodeLoss[0].Node != "node-c-2" {
		t.Fatalf("records %+v", d.NodeLoss)
	}
	kept := d.NodeLoss[0].UnheardSince.Time
	d = planFor(t, 3, "", func(f *Facts) { f.nodeDown("c-2", 2*time.Minute); f.Observer = "operator-b" })
	if r := d.NodeLoss[0]; r.Observer != "operator-b" || !r.UnheardSince.After(kept) {
		t.Errorf("another process must restart the clock: %+v (was %v)", r, kept)
	}
	d = planFor(t, 3, "", func(f *Facts) { f.nodeDown("c-2", time.Hour); f.m("c-2").Nodes.Peer.Active = true })
	if len(d.NodeLoss) != 0 {
		t.Errorf("the leader hears it: records %+v, want none", d.NodeLoss)
	}
	d = planFor(t, 3, "", func(f *Facts) { f.nodeDown("c-2", time.Hour); f.m("c-2").Nodes.Pod.Ready = true })
	if len(d.NodeLoss) != 0 {
		t.Errorf("the node is Ready: records %+v, want none (etcd's silence alone is not timed here)", d.NodeLoss)
	}
	var now time.Time
	d = planFor(t, 3, "", func(f *Facts) {
		now = f.Now
		f.volumeCordoned("c-1", 0, time.Minute)
		f.Cluster.Status.NodeLoss[0].CordonedSince = nil // first seen now
	})
	if r := d.NodeLoss[0]; r.CordonedSince == nil || !r.CordonedSince.Time.Equal(now) || r.Node != "node-v" {
		t.Errorf("a cordon first seen: %+v", r)
	}
	d = planFor(t, 3, "", func(f *Facts) { f.volumeCordoned("c-1", time.Hour, time.Minute) })
	if r := d.NodeLoss[0]; !r.CordonedSince.Time.Equal(now.Add(-time.Hour)) {
		t.Errorf("a cordon seen before keeps its start: %+v", r)
	}
	d = planFor(t, 3, "", func(f *Facts) {
		f.volumeCordoned("c-1", time.Hour, time.Minute)
		f.m("c-1").Nodes.Volume.Known = false
	})
	if r := d.NodeLoss; len(r) != 1 || r[0].CordonedSince == nil || !r[0].CordonedSince.Time.Equal(now.Add(-time.Hour)) {
		t.Errorf("a Node that could not be read keeps the cordon's start: %+v", r)
	}
	d = planFor(t, 3, "", func(f *Facts) {
		f.volumeCordoned("c-1", time.Hour, time.Minute)
		f.m("c-1").Nodes.Volume.Cordoned = false
	})
	if len(d.NodeLoss) != 0 {
		t.Errorf("uncordoned: the cordon's clock goes: %+v", d.NodeLoss)
	}
}

// Status says what is waited for, and until when; the chokepoint's view carries the evidence.
func TestNodeLossStatus(t *testing.T) {
	d := planFor(t, 3, "", func(f *Facts) { f.volumeCordoned("c-1", 10*time.Minute, 10*time.Minute) })
	c := d.Condition(ConditionDegraded)
	if c.Reason != string(ReasonMemberNodeLost) || !strings.Contains(c.Message, "c-1") || !strings.Contains(c.Message, "replacing it at") {
		t.Errorf("Degraded %s: %s", c.Reason, c.Message)
	}
	if p := d.Condition(ConditionProgressing); !strings.Contains(p.Message, "cordoned") {
		t.Errorf("Progressing %s: %s", p.Reason, p.Message)
	}
	d = planFor(t, 3, "", func(f *Facts) {
		f.m("c-2").Nodes = NodeFacts{Pod: evidence.Node{Name: "n", Known: true, Deleted: true}, Peer: evidence.PeerView{Known: true, Active: true}}
	})
	if c := d.Condition(ConditionDegraded); c.Reason != string(ReasonWaitingForNodeLoss) || !strings.Contains(c.Message, "still hears") {
		t.Errorf("Degraded %s: %s", c.Reason, c.Message)
	}
	f := healthyFacts(t, 3, "")
	f.nodeDown("c-2", time.Hour)
	for _, m := range f.DisruptionView().Members {
		if m.Lost != (m.Name == "c-2") {
			t.Errorf("%s: Lost %v", m.Name, m.Lost)
		}
	}
	f.nodeDown("c-1", time.Minute)
	for _, m := range f.DisruptionView().Members {
		if m.Name == "c-1" && m.Lost {
			t.Error("c-1's loss is not due yet: not Lost to the chokepoint")
		}
	}
}
