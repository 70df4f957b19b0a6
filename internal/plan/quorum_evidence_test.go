package plan

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
)

// Issue 23: a recovery starts only on etcd's own evidence that quorum is lost, never on what the
// operator cannot reach.

// partitioned: the operator reaches only c-0, which answers without a leader (it is the one cut
// off, or the operator is on its side of a partition); c-1 and c-2 run, with their PVCs, and may
// hold quorum between them.
func partitioned(f *Facts) {
	f.silence("c-1")
	f.silence("c-2")
	f.ep("c-1").Err, f.ep("c-2").Err = "context deadline exceeded", "context deadline exceeded"
	f.leaderless("c-0")
	f.ep("c-0").RaftIndex = 500
	f.Etcd.MemberListErr = "context deadline exceeded"
	f.Etcd.Members = nil
}

// unreachable: the operator reaches no member; every Pod runs on its PVC.
func unreachable(f *Facts) {
	partitioned(f)
	f.silence("c-0")
	f.ep("c-0").Err = "context deadline exceeded"
}

func confirm(id string) func(f *Facts) {
	return func(f *Facts) {
		if f.Cluster.Annotations == nil {
			f.Cluster.Annotations = map[string]string{}
		}
		f.Cluster.Annotations[stewardv1.AnnotationRecoverQuorumConfirm] = id
	}
}

func TestRecoveryNeedsEtcdsEvidence(t *testing.T) {
	hourAgo := automatic(300, time.Hour)
	tests := []struct {
		name   string
		mutate func(f *Facts)
		want   want
	}{
		{name: "the operator cut off from two members, Automatic long past afterSeconds: no fence", mutate: all(partitioned, hourAgo),
			want: want{kind: Wait, reason: ReasonMembersUnreachable, message: "cannot reach c-1, c-2 (context deadline exceeded)"}},
		{name: "the operator cut off from every member with a backup: no restore", mutate: all(unreachable, withBackup, hourAgo),
			want: want{kind: Wait, reason: ReasonMembersUnreachable, message: "cannot reach c-0, c-1, c-2"}},
		{name: "a member answering with a leader: the annotation does nothing", mutate: all(partitioned, annotate("auto"),
			func(f *Facts) { f.ep("c-0").LeaderID = 0x11 }), want: want{kind: Wait, reason: ReasonMembersUnreachable}},
		{name: "a human confirms with the cluster ID: the plan runs", mutate: all(partitioned, annotate("auto"), func(f *Facts) {
			confirm(f.Cluster.Status.ClusterID)(f)
		}), want: want{kind: StartRecovery, member: "c-0", reason: ReasonRecoveringQuorum}},
		{name: "a confirmation naming another cluster is no confirmation", mutate: all(partitioned, annotate("auto"), confirm("beef")),
			want: want{kind: Wait, reason: ReasonMembersUnreachable}},
		{name: "Automatic never acts on a confirmation", mutate: all(partitioned, hourAgo, func(f *Facts) {
			confirm(f.Cluster.Status.ClusterID)(f)
		}), want: want{kind: Wait, reason: ReasonMembersUnreachable}},
		// Positive evidence for a strict majority: the kubelets of Ready nodes report etcd down.
		{name: "two members whose kubelet reports etcd not running: Automatic runs", mutate: all(partitioned, hourAgo, func(f *Facts) {
			for _, n := range []string{"c-1", "c-2"} {
				f.m(n).Pod.NodeReady, f.m(n).Pod.Stopped = true, true
			}
		}), want: want{kind: StartRecovery, member: "c-0", message: "(Automatic)"}},
		{name: "a NotReady node's report is stale: no evidence", mutate: all(partitioned, hourAgo, func(f *Facts) {
			for _, n := range []string{"c-1", "c-2"} {
				f.m(n).Pod.NodeReady, f.m(n).Pod.Stopped = false, true
			}
		}), want: want{kind: Wait, reason: ReasonMembersUnreachable}},
		{name: "two members on deleted nodes: Automatic runs", mutate: all(partitioned, hourAgo, func(f *Facts) {
			f.m("c-1").Pod.NodeGone, f.m("c-2").Pod.NodeGone = true, true
		}), want: want{kind: StartRecovery, member: "c-0"}},
		{name: "one member's data gone, one unreachable: no majority of evidence", mutate: all(unreachable, hourAgo, func(f *Facts) {
			f.m("c-1").PVC = PVC{}
		}), want: want{kind: Wait, reason: ReasonMembersUnreachable}},
		// Finding 2: a refused trigger must not keep Pods from being recreated on their PVCs.
		{name: "a refused trigger lets a missing Pod come back on its PVC", mutate: all(partitioned, annotate("auto"),
			func(f *Facts) { f.m("c-2").Pod = Pod{} }),
			want: want{kind: CreatePod, member: "c-2", reason: ReasonMemberPodMissing}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkAction(t, planFor(t, 3, "", tt.mutate), tt.want)
		})
	}
}

func TestRecoveryRefusedOnIncompleteEvidence(t *testing.T) {
	d := planFor(t, 3, "", all(partitioned, annotate("auto")))
	checkRefused(t, d, "Steward recovers only on etcd's evidence that quorum is lost")
	for _, w := range []string{stewardv1.AnnotationRecoverQuorumConfirm, "cannot reach c-1, c-2"} {
		if !strings.Contains(d.DropRecoverAnnotation, w) {
			t.Errorf("drop reason %q lacks %q", d.DropRecoverAnnotation, w)
		}
	}
	if d.LostSince != nil {
		t.Errorf("lostSince %v while the evidence is incomplete", d.LostSince)
	}
	c := d.Condition(ConditionAvailable)
	if c.Status != metav1.ConditionUnknown || c.Reason != string(ReasonMembersUnreachable) {
		t.Errorf("Available %s %s %q", c.Status, c.Reason, c.Message)
	}
	// Not needed: etcd shows quorum; the annotation goes too, or it fires on the next blip.
	d = planFor(t, 3, "", annotate("auto"))
	if !strings.Contains(d.DropRecoverAnnotation, "not needed: quorum is healthy") {
		t.Errorf("healthy cluster: drop %q", d.DropRecoverAnnotation)
	}
	// Kept while the recovery it started runs.
	d = planFor(t, 3, "", all(lostQuorum, annotate("auto"), inProgress(stewardv1.RecoveryFencing)))
	if d.DropRecoverAnnotation != "" {
		t.Errorf("in progress: drop %q", d.DropRecoverAnnotation)
	}
}

// The Automatic clock counts only what this operator process saw without a break.
func TestAutomaticClockIsTheRunningOperators(t *testing.T) {
	other := func(f *Facts) { f.Observer, f.Cluster.Status.QuorumRecovery.Observer = "operator-b", "operator-a" }
	d := planFor(t, 3, "", all(lostQuorum, automatic(300, time.Hour), other))
	checkAction(t, d, want{kind: Wait, reason: ReasonQuorumLost})
	if d.LostSince == nil || d.LostObserver != "operator-b" {
		t.Fatalf("another process's record must restart the clock: since %v observer %q", d.LostSince, d.LostObserver)
	}
	same := func(f *Facts) { f.Observer, f.Cluster.Status.QuorumRecovery.Observer = "operator-a", "operator-a" }
	checkAction(t, planFor(t, 3, "", all(lostQuorum, automatic(300, time.Hour), same)),
		want{kind: StartRecovery, member: "c-0", message: "(Automatic)"})
	// Evidence of quorum (or its absence) clears the clock.
	d = planFor(t, 3, "", all(partitioned, automatic(300, time.Hour), same))
	if d.LostSince != nil || d.LostObserver != "" {
		t.Errorf("incomplete evidence kept the clock: %v %q", d.LostSince, d.LostObserver)
	}
}

func TestLostSinceStartsNowForANewObserver(t *testing.T) {
	f := healthyFacts(t, 3, "")
	all(lostQuorum, automatic(300, time.Hour))(&f)
	f.Observer = "operator-b"
	d := Plan(f)
	if d.LostSince == nil || !d.LostSince.Time.Equal(f.Now) {
		t.Errorf("lostSince %v, want now %v", d.LostSince, f.Now)
	}
}

// Each destructive stage looks again: a recovery whose evidence went is abandoned while the
// survivor has not been started with --force-new-cluster.
func TestRecoveryAborts(t *testing.T) {
	quorumBack := func(f *Facts) {
		f.m("c-2").Pod, f.m("c-2").PVC = Pod{Exists: true, Phase: "Running"}, PVC{Exists: true}
		e := f.ep("c-2")
		e.Reachable, e.LeaderID, e.ReadOK = true, 0x13, true
	}
	ahead := func(f *Facts) {
		f.m("c-1").Pod, f.m("c-1").PVC = Pod{Exists: true, Phase: "Running"}, PVC{Exists: true}
		e := f.ep("c-1")
		e.Reachable, e.RaftIndex = true, 900
	}
	tests := []struct {
		name   string
		mutate func(f *Facts)
		want   want
	}{
		{name: "fencing: quorum is back", mutate: all(lostQuorum, inProgress(stewardv1.RecoveryFencing), quorumBack),
			want: want{kind: AbortRecovery, member: "c-0", reason: ReasonQuorumRecoveryAborted, message: "etcd shows quorum: c-2"}},
		{name: "fencing: another member holds more of the log", mutate: all(lostQuorum, inProgress(stewardv1.RecoveryFencing), ahead),
			want: want{kind: AbortRecovery, member: "c-0", message: "c-1 (raft index 900) holds more of the log than the survivor c-0"}},
		{name: "a named survivor is the human's choice, ahead or not", mutate: all(lostQuorum, inProgress(stewardv1.RecoveryFencing), ahead,
			func(f *Facts) { f.Cluster.Status.QuorumRecovery.InProgress.Trigger = "c-0" }),
			want: want{kind: DeletePod, member: "c-1", reason: ReasonFencingMember, disruption: disruption.Fence}},
		{name: "before the flag: quorum is back", mutate: all(lostQuorum, inProgress(stewardv1.RecoveryForceNewCluster), quorumBack),
			want: want{kind: AbortRecovery, member: "c-0"}},
		{name: "the survivor's Pod already carries the flag: carry on", mutate: all(lostQuorum,
			inProgress(stewardv1.RecoveryForceNewCluster), aloneAfterForce(true)),
			want: want{kind: RecoveryStep, member: "c-0", message: "without --force-new-cluster"}},
		{name: "restarting: past return", mutate: all(lostQuorum, inProgress(stewardv1.RecoveryRestarting), aloneAfterForce(true)),
			want: want{kind: DeletePod, member: "c-0", disruption: disruption.Fence}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkAction(t, planFor(t, 3, "", tt.mutate), tt.want)
		})
	}
}

// The chokepoint refuses to fence on its own fresh read when etcd shows quorum.
func TestFenceRefusedWhenQuorumShows(t *testing.T) {
	f := healthyFacts(t, 3, "")
	all(lostQuorum, inProgress(stewardv1.RecoveryFencing))(&f)
	f.m("c-1").Pod, f.m("c-1").PVC = Pod{Exists: true, Phase: "Running"}, PVC{Exists: true}
	if err := disruption.Check(f.DisruptionView(), disruption.Request{Kind: disruption.Fence, Victim: "c-1"}); err != nil {
		t.Fatalf("fence refused while quorum is lost: %v", err)
	}
	e := f.ep("c-1")
	e.Reachable, e.LeaderID = true, 0x12
	err := disruption.Check(f.DisruptionView(), disruption.Request{Kind: disruption.Fence, Victim: "c-1"})
	if err == nil || !strings.Contains(err.Error(), string(disruption.ReasonQuorumShown)) {
		t.Fatalf("fence with quorum shown: %v", err)
	}
}
