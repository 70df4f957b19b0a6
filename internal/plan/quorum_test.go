package plan

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/health"
)

// lostQuorum: c-1 and c-2 are gone with their PVCs; c-0 runs but has no leader,
// and the member list cannot be read.
func lostQuorum(f *Facts) {
	f.podGone("c-1")
	f.podGone("c-2")
	f.m("c-1").PVC, f.m("c-2").PVC = PVC{}, PVC{}
	e := f.ep("c-0")
	e.Healthy, e.LeaderID, e.ReadOK, e.RaftIndex, e.Revision = false, 0, false, 500, 120
	f.Etcd.MemberListErr = "context deadline exceeded"
	f.Etcd.Members = nil
}

func annotate(v string) func(f *Facts) {
	return func(f *Facts) { f.Cluster.Annotations = map[string]string{stewardv1.AnnotationRecoverQuorum: v} }
}

func inProgress(stage stewardv1.QuorumRecoveryStage) func(f *Facts) {
	return func(f *Facts) {
		f.Cluster.Status.QuorumRecovery = &stewardv1.QuorumRecoveryStatus{InProgress: &stewardv1.QuorumRecoveryProgress{
			Survivor: "c-0", Stage: stage, Trigger: "auto", Discarded: []string{"c-1", "c-2"}}}
	}
}

// aloneAfterForce: c-0 serves as a one-member cluster (after --force-new-cluster).
func aloneAfterForce(forced bool) func(f *Facts) {
	return func(f *Facts) {
		f.m("c-0").Pod.ForceNewCluster = forced
		e := f.ep("c-0")
		e.Healthy, e.ReadOK, e.LeaderID = true, true, e.MemberID
		f.Etcd.MemberListErr = ""
		f.Etcd.Members = []health.Member{{ID: e.MemberID, Name: "c-0", PeerURLs: []string{f.m("c-0").PeerURL}}}
	}
}

func TestPlanQuorumRecovery(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(f *Facts)
		want   want
	}{
		{name: "without a trigger it only waits", mutate: lostQuorum,
			want: want{kind: Wait, reason: ReasonQuorumLost}},
		{name: "auto starts a recovery from the member with data that answers", mutate: all(lostQuorum, annotate("auto")),
			want: want{kind: StartRecovery, member: "c-0", reason: ReasonRecoveringQuorum, message: "keeps c-0's data (raft index 500, revision 120)"}},
		{name: "the highest raft index wins", mutate: all(lostQuorum, annotate("auto"), func(f *Facts) {
			f.m("c-1").Pod, f.m("c-1").PVC = Pod{Exists: true, Phase: "Running"}, PVC{Exists: true}
			*f.ep("c-1") = health.Endpoint{Member: "c-1", Reachable: true, RaftIndex: 700, Revision: 130}
		}), want: want{kind: StartRecovery, member: "c-1", message: "raft index 700"}},
		{name: "a tie goes to the lowest ordinal", mutate: all(lostQuorum, annotate("auto"), func(f *Facts) {
			f.m("c-1").Pod, f.m("c-1").PVC = Pod{Exists: true, Phase: "Running"}, PVC{Exists: true}
			*f.ep("c-1") = health.Endpoint{Member: "c-1", Reachable: true, RaftIndex: 500}
		}), want: want{kind: StartRecovery, member: "c-0"}},
		{name: "a named member is taken even if behind", mutate: all(lostQuorum, annotate("c-1"), func(f *Facts) {
			f.m("c-1").Pod, f.m("c-1").PVC = Pod{Exists: true, Phase: "Running"}, PVC{Exists: true}
			*f.ep("c-1") = health.Endpoint{Member: "c-1", Reachable: true, RaftIndex: 400}
		}), want: want{kind: StartRecovery, member: "c-1", message: "c-0 (raft index 500) applied more than the survivor"}},
		{name: "a healthy cluster ignores the annotation", mutate: annotate("auto"), want: want{kind: Nothing}},
		{name: "Automatic waits afterSeconds", mutate: all(lostQuorum, automatic(300, 299*time.Second)),
			want: want{kind: Wait, reason: ReasonQuorumLost}},
		{name: "Automatic runs after afterSeconds", mutate: all(lostQuorum, automatic(300, 300*time.Second)),
			want: want{kind: StartRecovery, member: "c-0", message: "(Automatic)"}},

		{name: "fencing deletes the other Pods through the chokepoint", mutate: all(lostQuorum, inProgress(stewardv1.RecoveryFencing),
			func(f *Facts) { f.m("c-2").Pod = Pod{Exists: true, Phase: "Running"} }),
			want: want{kind: DeletePod, member: "c-2", reason: ReasonFencingMember, disruption: disruption.Fence}},
		{name: "fencing waits for Pods to be gone, not terminating", mutate: all(lostQuorum, inProgress(stewardv1.RecoveryFencing),
			func(f *Facts) { f.m("c-2").Pod = Pod{Exists: true, Deleting: true} }),
			want: want{kind: Wait, reason: ReasonRecoveringQuorum, message: "waiting for c-2's Pod to be gone"}},
		{name: "fencing goes on while a fenced Pod terminates (no member serves: nothing to stagger)",
			mutate: all(lostQuorum, inProgress(stewardv1.RecoveryFencing), func(f *Facts) {
				f.m("c-1").Pod = Pod{Exists: true, Deleting: true}
				f.m("c-2").Pod = Pod{Exists: true, Phase: "Running"}
			}),
			want: want{kind: DeletePod, member: "c-2", reason: ReasonFencingMember, disruption: disruption.Fence}},
		{name: "fenced: record the next stage before acting", mutate: all(lostQuorum, inProgress(stewardv1.RecoveryFencing)),
			want: want{kind: RecoveryStep, member: "c-0", message: "starting c-0 with --force-new-cluster"}},
		{name: "the survivor's Pod is restarted", mutate: all(lostQuorum, inProgress(stewardv1.RecoveryForceNewCluster)),
			want: want{kind: DeletePod, member: "c-0", disruption: disruption.Fence}},
		{name: "and created with the flag", mutate: all(lostQuorum, inProgress(stewardv1.RecoveryForceNewCluster), func(f *Facts) { f.podGone("c-0") }),
			want: want{kind: CreatePod, member: "c-0", message: "with --force-new-cluster"}},
		{name: "a flagged Pod is never recreated: wait for it to serve", mutate: all(lostQuorum, inProgress(stewardv1.RecoveryForceNewCluster),
			func(f *Facts) { f.m("c-0").Pod.ForceNewCluster = true }),
			want: want{kind: Wait, reason: ReasonRecoveringQuorum, message: "serve as a one-member cluster"}},
		{name: "serving alone: next stage", mutate: all(lostQuorum, inProgress(stewardv1.RecoveryForceNewCluster), aloneAfterForce(true)),
			want: want{kind: RecoveryStep, member: "c-0", message: "without --force-new-cluster"}},
		{name: "the flagged Pod goes", mutate: all(lostQuorum, inProgress(stewardv1.RecoveryRestarting), aloneAfterForce(true)),
			want: want{kind: DeletePod, member: "c-0", disruption: disruption.Fence}},
		{name: "and comes back without the flag", mutate: all(lostQuorum, inProgress(stewardv1.RecoveryRestarting), func(f *Facts) { f.podGone("c-0") }),
			want: want{kind: CreatePod, member: "c-0", message: "without --force-new-cluster"}},
		{name: "serving without the flag: drop the others", mutate: all(lostQuorum, inProgress(stewardv1.RecoveryRestarting), aloneAfterForce(false)),
			want: want{kind: RecoveryStep, member: "c-0", message: "dropping the other members"}},
		{name: "one at a time", mutate: all(lostQuorum, inProgress(stewardv1.RecoveryDiscarding), aloneAfterForce(false)),
			want: want{kind: DiscardMember, member: "c-1"}},
		{name: "then finish", mutate: all(lostQuorum, inProgress(stewardv1.RecoveryDiscarding), aloneAfterForce(false), func(f *Facts) {
			f.Members = f.Members[:1]
		}), want: want{kind: FinishRecovery, member: "c-0", reason: ReasonQuorumRecovered}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkAction(t, planFor(t, 3, "", tt.mutate), tt.want)
		})
	}
}

// A refused trigger is said in the condition and the annotation goes; the plan passes on to the
// steps that recreate Pods on their PVCs (issue 23: a refusal must not keep them from running).
func TestQuorumRecoveryRefused(t *testing.T) {
	tests := []struct {
		name    string
		medium  stewardv1.StorageMedium
		mutate  func(f *Facts)
		message string
	}{
		{name: "an unknown member", mutate: all(lostQuorum, annotate("c-9")), message: `no member is named "c-9"`},
		{name: "a member whose etcd does not answer", mutate: all(lostQuorum, annotate("c-2")),
			message: "c-2 is not a voter whose etcd answers"},
		{name: "no member answers: nothing to recover from", mutate: all(lostQuorum, annotate("auto"), func(f *Facts) { f.silence("c-0") }),
			message: "no survivor"},
		{name: "memory without a backup", medium: stewardv1.StorageMediumMemory, mutate: all(lostQuorum, annotate("auto")),
			message: "storage is Memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := planFor(t, 3, tt.medium, tt.mutate)
			checkRefused(t, d, tt.message)
		})
	}
}

// checkRefused: no recovery starts, the condition says why, and the annotation is to be removed.
func checkRefused(t *testing.T, d Decision, message string) {
	t.Helper()
	if d.Action.Kind == StartRecovery {
		t.Fatalf("a refused trigger started a recovery: %s", d.Action.Message)
	}
	if c := d.Condition(ConditionQuorumRecovery); c.Reason != string(ReasonQuorumRecoveryRefused) || !strings.Contains(c.Message, message) {
		t.Errorf("condition %s %q, want %s ~%q", c.Reason, c.Message, ReasonQuorumRecoveryRefused, message)
	}
	if !strings.Contains(d.DropRecoverAnnotation, message) {
		t.Errorf("the annotation is kept (drop %q), want it removed saying %q", d.DropRecoverAnnotation, message)
	}
}

func automatic(after int32, lost time.Duration) func(f *Facts) {
	return func(f *Facts) {
		f.Cluster.Spec.QuorumLoss = &stewardv1.QuorumLossSpec{Policy: stewardv1.QuorumLossAutomatic, AfterSeconds: ptr.To(after)}
		f.Cluster.Status.QuorumRecovery = &stewardv1.QuorumRecoveryStatus{LostSince: ptr.To(metav1.NewTime(f.Now.Add(-lost)))}
	}
}

func withBackup(f *Facts) {
	f.Cluster.Status.Backup = &stewardv1.BackupSummary{LastSuccessfulBackup: &stewardv1.BackupRef{Name: "nightly-1", Revision: 90,
		Time: ptr.To(metav1.NewTime(f.Now.Add(-time.Hour)))}}
}

// No member with data, but a backup: the same trigger rebuilds the cluster from it.
func TestQuorumRecoveryFromBackup(t *testing.T) {
	// No member with data: c-0's etcd is silent and its PVC is gone too.
	noSurvivor := all(lostQuorum, func(f *Facts) { f.silence("c-0"); f.m("c-0").PVC = PVC{} })
	restoring := func(stage stewardv1.QuorumRecoveryStage) func(f *Facts) {
		return func(f *Facts) {
			f.Cluster.Status.QuorumRecovery = &stewardv1.QuorumRecoveryStatus{InProgress: &stewardv1.QuorumRecoveryProgress{
				RestoreFrom: "nightly-1", Stage: stage, Trigger: "auto", Discarded: []string{"c-0", "c-1", "c-2"}}}
		}
	}
	tests := []struct {
		name   string
		medium stewardv1.StorageMedium
		mutate func(f *Facts)
		want   want
	}{
		{name: "with one: the trigger rebuilds from it", mutate: all(noSurvivor, withBackup, annotate("auto")),
			want: want{kind: StartRecovery, reason: ReasonRecoveringQuorum, message: "from backup nightly-1 (auto): no member with data answers"}},
		{name: "memory with a backup", medium: stewardv1.StorageMediumMemory, mutate: all(lostQuorum, withBackup, annotate("auto")),
			want: want{kind: StartRecovery, message: "storage is Memory"}},
		{name: "every Pod is fenced, the one that still runs too", mutate: all(noSurvivor, withBackup, restoring(stewardv1.RecoveryFencing)),
			want: want{kind: DeletePod, member: "c-0", reason: ReasonFencingMember, disruption: disruption.Fence}},
		{name: "the next Pod is fenced while one terminates", mutate: all(noSurvivor, withBackup, restoring(stewardv1.RecoveryFencing), func(f *Facts) {
			f.m("c-0").Pod.Deleting = true
			f.m("c-2").Pod = Pod{Exists: true, Phase: "Running"}
		}), want: want{kind: DeletePod, member: "c-2", reason: ReasonFencingMember, message: "deleting its Pod)", disruption: disruption.Fence}},
		{name: "then it waits for them to be gone", mutate: all(noSurvivor, withBackup, restoring(stewardv1.RecoveryFencing), func(f *Facts) {
			f.m("c-0").Pod.Deleting = true
		}), want: want{kind: Wait, reason: ReasonRecoveringQuorum, message: "waiting for c-0's Pod to be gone"}},
		{name: "fenced: drop them", mutate: all(noSurvivor, withBackup, restoring(stewardv1.RecoveryFencing), func(f *Facts) { f.podGone("c-0") }),
			want: want{kind: RecoveryStep, message: "dropping them to rebuild from backup nightly-1"}},
		{name: "one at a time", mutate: all(noSurvivor, withBackup, restoring(stewardv1.RecoveryDiscarding), func(f *Facts) { f.podGone("c-0") }),
			want: want{kind: DiscardMember, member: "c-0"}},
		{name: "all dropped: reseed", mutate: all(noSurvivor, withBackup, restoring(stewardv1.RecoveryDiscarding), func(f *Facts) { f.Members = nil }),
			want: want{kind: RecoveryStep, message: "seeding a new cluster from backup nightly-1"}},
		{name: "reseeding: the seed takes an ordinal no kept PVC holds", mutate: all(withBackup, restoring(stewardv1.RecoveryReseeding),
			func(f *Facts) {
				f.Members, f.Etcd = nil, health.Facts{MemberListErr: "no endpoints"}
				f.Cluster.Status.ClusterID = ""
				f.ReservedOrdinals = []int32{0, 1, 2}
			}), want: want{kind: CreateMember, member: "c-3", reason: ReasonBootstrapping}},
		{name: "the restored seed serves: done", mutate: all(withBackup, restoring(stewardv1.RecoveryReseeding), func(f *Facts) {
			f.Members = f.Members[:1]
			f.Etcd.Members = f.Etcd.Members[:1]
		}), want: want{kind: FinishRecovery, member: "c-0", reason: ReasonQuorumRecovered}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkAction(t, planFor(t, 3, tt.medium, tt.mutate), tt.want)
		})
	}
	checkRefused(t, planFor(t, 3, "", all(noSurvivor, annotate("auto"))), "has no successful EtcdBackup")
	// A member that keeps its PVC may hold newer writes than the backup: no rebuild while it exists.
	kept := all(lostQuorum, withBackup, func(f *Facts) { f.silence("c-0") })
	checkRefused(t, planFor(t, 3, "", all(kept, annotate("auto"))), "c-0 keep their PVCs and may hold writes newer than any backup")
	d := planFor(t, 3, "", all(noSurvivor, withBackup))
	if p := d.RecoveryPlan; p == nil || p.RestoreFrom != "nightly-1" || p.Revision != 90 || len(p.Discarded) != 3 ||
		!strings.Contains(p.Loss, "every write after it is lost") {
		t.Errorf("plan %+v", p)
	}
}

func TestQuorumRecoveryStatus(t *testing.T) {
	d := planFor(t, 3, "", lostQuorum)
	p := d.RecoveryPlan
	if d.LostSince == nil || p == nil || p.Survivor != "c-0" || p.RaftIndex != 500 || p.Revision != 120 ||
		strings.Join(p.Discarded, ",") != "c-1,c-2" || !strings.Contains(p.Loss, "PVCs are kept") {
		t.Fatalf("plan %+v since %v", p, d.LostSince)
	}
	c := d.Condition(ConditionQuorumRecovery)
	if c.Status != "False" || c.Reason != string(ReasonQuorumLost) || !strings.Contains(c.Message, "etcd.steward.dev/recover-quorum=auto") {
		t.Errorf("condition %+v", c)
	}
	d = planFor(t, 3, "", annotate("auto"))
	if c := d.Condition(ConditionQuorumRecovery); c.Reason != string(ReasonQuorumRecoveryNotNeeded) || d.RecoveryPlan != nil {
		t.Errorf("healthy with the annotation: %+v", c)
	}
	d = planFor(t, 3, "", all(lostQuorum, inProgress(stewardv1.RecoveryFencing)))
	if c := d.Condition(ConditionQuorumRecovery); c.Status != "True" || !strings.Contains(c.Message, "stage Fencing") {
		t.Errorf("in progress: %+v", c)
	}
}

// A new member never takes an ordinal whose PVC a recovery kept.
func TestScaleSkipsReservedOrdinals(t *testing.T) {
	d := planFor(t, 1, "", func(f *Facts) {
		f.setReplicas(2)
		f.ReservedOrdinals = []int32{1, 2}
	})
	checkAction(t, d, want{kind: CreateMember, member: "c-3", reason: ReasonScalingUp})
}
