package plan

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/health"
)

type planCase struct {
	name   string
	n      int32
	medium stewardv1.StorageMedium
	mutate func(f *Facts)
	want   want
}

func runPlanCases(t *testing.T, cases []planCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			checkAction(t, planFor(t, tt.n, tt.medium, tt.mutate), tt.want)
		})
	}
}

// planFor plans on a healthy cluster of n members (3 when n is 0), changed by mutate.
func planFor(t *testing.T, n int32, medium stewardv1.StorageMedium, mutate func(*Facts)) Decision {
	t.Helper()
	if n == 0 {
		n = 3
	}
	f := healthyFacts(t, n, medium)
	if mutate != nil {
		mutate(&f)
	}
	return Plan(f)
}

func checkAction(t *testing.T, d Decision, w want) {
	t.Helper()
	a := d.Action
	if a.Kind != w.kind || a.Member != w.member || (w.reason != "" && a.Reason != w.reason) || a.Target != w.target {
		t.Fatalf("got %s [%s]\nwant %s %s (%s) target %q", a, a.Message, w.kind, w.member, w.reason, w.target)
	}
	switch {
	case w.disruption == "" && a.Disruption != nil:
		t.Errorf("action carries disruption %+v, want none", *a.Disruption)
	case w.disruption != "" && (a.Disruption == nil || a.Disruption.Kind != w.disruption || a.Disruption.Victim != a.Member):
		t.Errorf("disruption = %+v, want %s of %s", a.Disruption, w.disruption, a.Member)
	}
	if !strings.Contains(a.Message, w.message) {
		t.Errorf("message %q does not mention %q", a.Message, w.message)
	}
	if a.Message == "" {
		t.Errorf("every action explains itself")
	}
}

// TestPlanBootstrap: issue 4, bootstrap steps.
func TestPlanBootstrap(t *testing.T) {
	fresh := func(f *Facts) {
		f.Members, f.Etcd = nil, health.Facts{MemberListErr: "connection refused"}
		f.Cluster.Status.ClusterID = ""
	}
	seedPending := func(f *Facts) {
		fresh(f)
		f.newMember(0, stewardv1.MemberPending)
	}
	runPlanCases(t, []planCase{
		{name: "first reconcile latches the target", mutate: func(f *Facts) { fresh(f); f.Cluster.Status.Observed = nil },
			want: want{kind: AdoptSpec, reason: ReasonInitialTarget}},
		{name: "no member: create the seed", mutate: fresh,
			want: want{kind: CreateMember, member: "c-0", reason: ReasonBootstrapping}},
		{name: "a spec edit before the seed exists is adopted first", mutate: func(f *Facts) {
			fresh(f)
			f.Cluster.Spec.Version = "3.5.33"
		}, want: want{kind: AdoptSpec, reason: ReasonSpecChanged}},
		{name: "seed without a Pod: start it as a new cluster", mutate: seedPending,
			want: want{kind: BootstrapSeed, member: "c-0", message: "initial-cluster-state=new"}},
		{name: "seed starting: wait", mutate: func(f *Facts) {
			seedPending(f)
			f.m("c-0").Pod = Pod{Exists: true}
		}, want: want{kind: Wait, reason: ReasonBootstrapping}},
		{name: "seed unschedulable: say so", mutate: func(f *Facts) {
			seedPending(f)
			f.m("c-0").Pod = Pod{Exists: true, Unschedulable: true}
		}, want: want{kind: Wait, reason: ReasonMemberUnschedulable}},
		{name: "seed unschedulable, spec fixed: adopt at once (nothing formed)", mutate: func(f *Facts) {
			seedPending(f)
			f.m("c-0").Pod = Pod{Exists: true, Unschedulable: true, Phase: corev1.PodPending}
			f.Cluster.Spec.NodeSelector = map[string]string{"fixed": "yes"}
		}, want: want{kind: AdoptSpec, reason: ReasonSpecChanged}},
		{name: "seed unschedulable on an old template: rebuild its Pod", mutate: func(f *Facts) {
			seedPending(f)
			f.m("c-0").Pod = Pod{Exists: true, Unschedulable: true, Phase: corev1.PodPending}
			f.m("c-0").Template.NodeSelector = map[string]string{"impossible": "yes"}
		}, want: want{kind: DeletePod, member: "c-0", reason: ReasonBootstrapping, disruption: disruption.Restart}},
		{name: "seed never started on an old template: rebuild its Pod", mutate: func(f *Facts) {
			seedPending(f)
			f.m("c-0").Pod = Pod{Exists: true, Phase: corev1.PodPending}
			f.m("c-0").Template.Version = "3.5.1"
		}, want: want{kind: DeletePod, member: "c-0", reason: ReasonBootstrapping, disruption: disruption.Restart}},
		{name: "seed running on an old template: not rebuilt during bootstrap", mutate: func(f *Facts) {
			seedPending(f)
			f.m("c-0").Pod = Pod{Exists: true, Phase: corev1.PodRunning}
			f.m("c-0").Template.Version = "3.5.1"
		}, want: want{kind: Wait, reason: ReasonBootstrapping}},
		{name: "seed PVC from another cluster: never adopted", mutate: func(f *Facts) {
			seedPending(f)
			f.m("c-0").PVC = PVC{Exists: true, Foreign: true}
		}, want: want{kind: Wait, reason: ReasonForeignPVC}},
		{name: "restore refused: no seed is created", mutate: func(f *Facts) {
			fresh(f)
			f.RestoreHold = `EtcdBackup "b1" is Failed`
		}, want: want{kind: Wait, reason: ReasonRestoreRefused, message: `EtcdBackup "b1" is Failed`}},
		{name: "restore refused: a seed without a Pod is not started", mutate: func(f *Facts) {
			seedPending(f)
			f.RestoreHold = "backup from etcd 3.7 is newer than spec.version 3.6.16"
		}, want: want{kind: Wait, reason: ReasonRestoreRefused}},
		{name: "restore hold is ignored once the cluster formed", mutate: func(f *Facts) {
			f.RestoreHold = "the backup was deleted after the restore"
		}, want: want{kind: Nothing, reason: ReasonReconciled}},
		{name: "replicas 0 before forming: nothing", mutate: func(f *Facts) { fresh(f); f.setReplicas(0) },
			want: want{kind: Nothing, reason: ReasonDormant}},
		{name: "seed listed but recorded Pending: record it", mutate: func(f *Facts) {
			f.memberPhase("c-0", stewardv1.MemberPending)
			f.m("c-0").ID = ""
		}, want: want{kind: RecordPhase, member: "c-0", reason: ReasonRecordingProgress}},
		{name: "a formed cluster never bootstraps again, even unreachable", n: 1, mutate: func(f *Facts) {
			f.podGone("c-0")
			f.Etcd = health.Facts{MemberListErr: "connection refused"}
		}, want: want{kind: CreatePod, member: "c-0", reason: ReasonMemberPodMissing}},
		{name: "clusterID alone proves the cluster formed", n: 1, mutate: func(f *Facts) {
			f.Members[0].Phase, f.Members[0].ID = stewardv1.MemberPending, ""
			f.podGone("c-0")
			f.Etcd = health.Facts{MemberListErr: "connection refused"}
		}, want: want{kind: Wait, reason: ReasonQuorumLost}},
	})
}

// TestPlanScale: issue 4, scale steps.
func TestPlanScale(t *testing.T) {
	runPlanCases(t, []planCase{
		{name: "up: the lowest free ordinal", mutate: func(f *Facts) { f.setReplicas(5) },
			want: want{kind: CreateMember, member: "c-3", reason: ScalingUpReason()}},
		{name: "up: a hole is filled first", n: 3, mutate: func(f *Facts) {
			f.Members[1].Ordinal, f.Members[1].Name = 4, "c-4"
			f.Etcd.Endpoints[1].Member = "c-4"
			f.Etcd.Members[1].Name, f.Etcd.Members[1].PeerURLs = "c-4", []string{peerURL("c-4")}
			f.Members[1].PeerURL = peerURL("c-4")
			f.setReplicas(4)
		}, want: want{kind: CreateMember, member: "c-1"}},
		{name: "up waits for a healthy cluster", mutate: func(f *Facts) { f.setReplicas(5); f.ep("c-1").Healthy = false },
			want: want{kind: Wait, reason: ReasonWaitingForHealth, message: "c-1"}},
		{name: "down: the highest ordinal", n: 5, mutate: func(f *Facts) { f.setReplicas(3) },
			want: want{kind: DeleteMember, member: "c-4", reason: ReasonScalingDown}},
		{name: "down: leadership leaves the victim first, to the lowest ordinal", n: 3, mutate: func(f *Facts) {
			f.setReplicas(2)
			f.lead("c-2")
		}, want: want{kind: MoveLeader, member: "c-2", target: "c-0", reason: ReasonMovingLeader}},
		{name: "down waits while a member is unhealthy", n: 5, mutate: func(f *Facts) {
			f.setReplicas(3)
			f.ep("c-1").ReadOK = false
		}, want: want{kind: Wait, reason: ReasonWaitingForHealth, message: "LinearizableRead"}},
		{name: "down to 1", n: 2, mutate: func(f *Facts) { f.setReplicas(1) },
			want: want{kind: DeleteMember, member: "c-1"}},
		{name: "pending member above replicas goes", mutate: func(f *Facts) { f.newMember(3, stewardv1.MemberPending) },
			want: want{kind: DeleteMember, member: "c-3", reason: ReasonScalingDown}},
		{name: "pending member: add as learner", mutate: func(f *Facts) { f.setReplicas(4); f.newMember(3, stewardv1.MemberPending) },
			want: want{kind: AddLearner, member: "c-3", reason: ReasonJoiningMember}},
		{name: "pending member waits for health", mutate: func(f *Facts) {
			f.setReplicas(4)
			f.newMember(3, stewardv1.MemberPending)
			f.ep("c-2").AppliedIndex = 0
		}, want: want{kind: Wait, reason: ReasonWaitingForHealth, message: "adding c-3"}},
		{name: "pending member with a leftover Pod: delete it", mutate: func(f *Facts) {
			f.setReplicas(4)
			f.newMember(3, stewardv1.MemberPending).Pod = Pod{Exists: true, Ready: true}
		}, want: want{kind: DeletePod, member: "c-3", reason: ReasonCleaningUp, disruption: disruption.Restart}},
		{name: "pending member with a leftover PVC: delete it", mutate: func(f *Facts) {
			f.setReplicas(4)
			f.newMember(3, stewardv1.MemberPending).PVC = PVC{Exists: true}
		}, want: want{kind: DeletePVC, member: "c-3", disruption: disruption.DeleteData}},
		{name: "pending member with a foreign PVC: never deleted", mutate: func(f *Facts) {
			f.setReplicas(4)
			f.newMember(3, stewardv1.MemberPending).PVC = PVC{Exists: true, Foreign: true}
		}, want: want{kind: Wait, reason: ReasonForeignPVC}},
		{name: "never scale while a learner exists: it is promoted first", mutate: func(f *Facts) {
			f.setReplicas(5)
			f.newMember(3, stewardv1.MemberLearner).Pod = Pod{Exists: true, Ready: true}
			f.addLearner("c-3", true)
		}, want: want{kind: PromoteLearner, member: "c-3"}},
	})
}

// ScalingUpReason keeps the table readable.
func ScalingUpReason() Reason { return ReasonScalingUp }

// TestPlanLearners: issue 4, a learner present; never two.
func TestPlanLearners(t *testing.T) {
	learner := func(ready, caughtUp bool) func(f *Facts) {
		return func(f *Facts) {
			f.setReplicas(4)
			f.newMember(3, stewardv1.MemberLearner).Pod = Pod{Exists: true, Ready: ready}
			f.addLearner("c-3", caughtUp)
		}
	}
	runPlanCases(t, []planCase{
		{name: "learner without a Pod: start it", mutate: func(f *Facts) {
			learner(false, false)(f)
			f.m("c-3").Pod = Pod{}
		}, want: want{kind: CreatePod, member: "c-3", reason: ReasonStartingMember}},
		{name: "caught up: promote", mutate: learner(true, true),
			want: want{kind: PromoteLearner, member: "c-3", reason: ReasonPromotingLearner}},
		{name: "behind: wait", mutate: learner(true, false),
			want: want{kind: Wait, reason: ReasonLearnerCatchingUp, message: "trails"}},
		{name: "Pod not ready: wait", mutate: learner(false, true),
			want: want{kind: Wait, reason: ReasonLearnerCatchingUp}},
		{name: "stuck past the timeout: remove it", mutate: func(f *Facts) {
			learner(true, false)(f)
			stepAgo(f, DefaultLearnerTimeout+time.Second)
		}, want: want{kind: RemoveMember, member: "c-3", reason: ReasonLearnerStuck, disruption: disruption.Remove}},
		{name: "not yet stuck at the timeout", mutate: func(f *Facts) {
			learner(true, false)(f)
			stepAgo(f, DefaultLearnerTimeout)
		}, want: want{kind: Wait, reason: ReasonLearnerCatchingUp}},
		{name: "custom timeout", mutate: func(f *Facts) {
			learner(true, false)(f)
			f.Limits.LearnerTimeout = time.Minute
			stepAgo(f, 2*time.Minute)
		}, want: want{kind: RemoveMember, member: "c-3", reason: ReasonLearnerStuck, disruption: disruption.Remove}},
		// etcd exited before joining: no peer gave it the member list (the data check's verdict).
		// Outside an adoption the learner timeout still retries (another node, new certificates);
		// TestSimAdoptionPeerRefused holds a refused learner of an adoption past it.
		{name: "join refused by a peer's certificate check: say so", mutate: func(f *Facts) {
			learner(false, false)(f)
			f.m("c-3").Pod.JoinRefused = "the last, https://c-0.c-peer.ns.svc:2380, failed with: remote error: tls: bad certificate"
		}, want: want{kind: Wait, reason: ReasonLearnerRefused, message: "the members refuse its peer certificate"}},
		{name: "join refused: no peer reached", mutate: func(f *Facts) {
			learner(false, false)(f)
			f.m("c-3").Pod.JoinRefused = "the last, https://c-0.c-peer.ns.svc:2380, failed with: dial tcp: i/o timeout"
		}, want: want{kind: Wait, reason: ReasonLearnerRefused, message: "reaches the peers' peer URLs"}},
		{name: "join refused past the timeout, not adopting: remove it to retry", mutate: func(f *Facts) {
			learner(false, false)(f)
			f.m("c-3").Pod.JoinRefused = "the last, https://c-0.c-peer.ns.svc:2380, failed with: remote error: tls: bad certificate"
			stepAgo(f, DefaultLearnerTimeout+time.Second)
		}, want: want{kind: RemoveMember, member: "c-3", reason: ReasonLearnerStuck, disruption: disruption.Remove}},
		{name: "unschedulable learner: say so", mutate: func(f *Facts) {
			learner(false, false)(f)
			f.m("c-3").Pod.Unschedulable = true
		}, want: want{kind: Wait, reason: ReasonMemberUnschedulable}},
		{name: "two learners: the newest goes", mutate: func(f *Facts) {
			learner(true, true)(f)
			f.setReplicas(5)
			f.newMember(4, stewardv1.MemberLearner).ID = "98"
			f.Etcd.Members = append(f.Etcd.Members, health.Member{ID: 0x98, PeerURLs: []string{peerURL("c-4")}, IsLearner: true})
		}, want: want{kind: RemoveMember, member: "c-4", reason: ReasonExtraLearner, disruption: disruption.Remove}},
		{name: "a learner nobody owns goes first", mutate: func(f *Facts) {
			f.Etcd.Members = append(f.Etcd.Members, health.Member{ID: 0x77, PeerURLs: []string{"http://x:2380"}, IsLearner: true})
		}, want: want{kind: RemoveMember, member: "unknown-member-77", reason: ReasonRemovingUnknownMember, disruption: disruption.Remove}},
		{name: "joined but not recorded: record Learner", mutate: func(f *Facts) {
			learner(true, false)(f)
			f.memberPhase("c-3", stewardv1.MemberJoining)
		}, want: want{kind: RecordPhase, member: "c-3", message: "MemberAddAsLearner already happened"}},
		{name: "promoted but not recorded: record Running", mutate: func(f *Facts) {
			learner(true, true)(f)
			f.live("c-3").IsLearner = false
		}, want: want{kind: RecordPhase, member: "c-3", message: "already a voter"}},
		{name: "join intent without MemberAdd: add it", mutate: func(f *Facts) {
			f.setReplicas(4)
			f.newMember(3, stewardv1.MemberJoining)
		}, want: want{kind: AddLearner, member: "c-3", message: "did not happen yet"}},
		{name: "join intent without MemberAdd, cluster unhealthy: withdraw it", mutate: func(f *Facts) {
			f.setReplicas(4)
			f.newMember(3, stewardv1.MemberJoining)
			f.ep("c-1").Healthy = false
		}, want: want{kind: RecordPhase, member: "c-3", message: "withdrawing"}},
	})
}

// TestPlanRemovals: a member deleting; finishing half-done removals from the live list.
func TestPlanRemovals(t *testing.T) {
	removing := func(name string) func(f *Facts) {
		return func(f *Facts) { f.memberPhase(name, stewardv1.MemberRemoving) }
	}
	gone := func(name string) func(f *Facts) {
		return func(f *Facts) { removing(name)(f); f.dropLive(name) }
	}
	runPlanCases(t, []planCase{
		{name: "replacement intent, still listed: remove it to replace it", mutate: removing("c-2"),
			want: want{kind: RemoveMember, member: "c-2", reason: ReasonRemovingMember, disruption: disruption.Replace}},
		{name: "scale-down intent, still listed: remove it for good", mutate: func(f *Facts) {
			f.setReplicas(2)
			f.m("c-2").Deleting = true
		}, want: want{kind: RemoveMember, member: "c-2", reason: ReasonRemovingMember, disruption: disruption.Remove}},
		{name: "removal intent on the leader: hand off first", mutate: func(f *Facts) { removing("c-2")(f); f.lead("c-2") },
			want: want{kind: MoveLeader, member: "c-2", target: "c-0"}},
		{name: "removal refused while another member is down: wait", n: 5, mutate: func(f *Facts) {
			removing("c-4")(f)
			f.m("c-1").Pod.Ready = false
		}, want: want{kind: Wait, reason: ReasonWaitingForHealth, message: "OtherMemberNotReady"}},
		{name: "removed: delete its Pod", mutate: gone("c-2"),
			want: want{kind: DeletePod, member: "c-2", reason: ReasonCleaningUp, disruption: disruption.Restart}},
		{name: "removed, Pod terminating: wait", mutate: func(f *Facts) { gone("c-2")(f); f.m("c-2").Pod.Deleting = true },
			want: want{kind: Wait, reason: ReasonWaitingForPodDeletion}},
		{name: "removed, Pod gone: delete its data", mutate: func(f *Facts) { gone("c-2")(f); f.m("c-2").Pod = Pod{} },
			want: want{kind: DeletePVC, member: "c-2", disruption: disruption.DeleteData}},
		{name: "removed, PVC terminating: wait", mutate: func(f *Facts) {
			gone("c-2")(f)
			f.m("c-2").Pod = Pod{}
			f.m("c-2").PVC.Deleting = true
		}, want: want{kind: Wait, reason: ReasonCleaningUp}},
		{name: "removed for replacement, all gone: reset", mutate: func(f *Facts) {
			gone("c-2")(f)
			f.m("c-2").Pod, f.m("c-2").PVC = Pod{}, PVC{}
		}, want: want{kind: ResetMember, member: "c-2"}},
		{name: "scale-down, all gone: finalize", mutate: func(f *Facts) {
			gone("c-2")(f)
			f.m("c-2").Deleting = true
			f.m("c-2").Pod, f.m("c-2").PVC = Pod{}, PVC{}
		}, want: want{kind: FinalizeMember, member: "c-2"}},
		{name: "memory scale-down, no PVC: finalize", medium: memory, mutate: func(f *Facts) {
			gone("c-2")(f)
			f.m("c-2").Deleting = true
			f.m("c-2").Pod = Pod{}
		}, want: want{kind: FinalizeMember, member: "c-2"}},
		{name: "deleting member still listed: remove it", mutate: func(f *Facts) { f.setReplicas(2); f.m("c-2").Deleting = true },
			want: want{kind: RemoveMember, member: "c-2", disruption: disruption.Remove}},
		{name: "removed out of band: replace through the removal flow", mutate: func(f *Facts) { f.dropLive("c-1") },
			want: want{kind: RecordPhase, member: "c-1", message: "left etcd"}},
		{name: "a voter nobody owns: remove it", mutate: func(f *Facts) {
			f.Etcd.Members = append(f.Etcd.Members, health.Member{ID: 0x55, Name: "stray", PeerURLs: []string{"http://stray:2380"}})
		}, want: want{kind: RemoveMember, member: "unknown-member-55", reason: ReasonRemovingUnknownMember, disruption: disruption.Remove}},
		{name: "a leading voter nobody owns: hand off first", mutate: func(f *Facts) {
			f.Etcd.Members = append(f.Etcd.Members, health.Member{ID: 0x55, Name: "stray", PeerURLs: []string{"http://stray:2380"}})
			for i := range f.Etcd.Endpoints {
				f.Etcd.Endpoints[i].LeaderID = 0x55
			}
		}, want: want{kind: MoveLeader, member: "unknown-member-55", target: "c-0"}},
		{name: "a Pod on its way out: wait", mutate: func(f *Facts) { f.m("c-1").Pod.Deleting = true },
			want: want{kind: Wait, reason: ReasonWaitingForPodDeletion, message: "c-1"}},
	})
}

// TestPlanRepair: issue 4, each repair case, and quorum lost.
func TestPlanRepair(t *testing.T) {
	crash := func(name string, restarts int32, reason string) func(f *Facts) {
		return func(f *Facts) { f.crashing(name, restarts, reason) }
	}
	runPlanCases(t, []planCase{
		{name: "pvc Pod gone: recreate it, same member", mutate: func(f *Facts) { f.podGone("c-1") },
			want: want{kind: CreatePod, member: "c-1", reason: ReasonMemberPodMissing}},
		{name: "pvc Pod and PVC gone: replace", mutate: func(f *Facts) { f.podGone("c-1"); f.m("c-1").PVC = PVC{} },
			want: want{kind: RemoveMember, member: "c-1", reason: ReasonMemberDataLost, disruption: disruption.Replace}},
		{name: "pvc Pod gone, PVC foreign: refuse", mutate: func(f *Facts) { f.podGone("c-1"); f.m("c-1").PVC.Foreign = true },
			want: want{kind: Wait, reason: ReasonForeignPVC}},
		{name: "memory Pod gone: replace", medium: memory, mutate: func(f *Facts) { f.podGone("c-1") },
			want: want{kind: RemoveMember, member: "c-1", reason: ReasonMemberDataLost, disruption: disruption.Replace}},
		{name: "crash-looping: replace", mutate: crash("c-2", 6, "Error"),
			want: want{kind: RemoveMember, member: "c-2", reason: ReasonMemberCrashLooping, disruption: disruption.Replace}},
		{name: "third crash, backing off: replace", mutate: crash("c-2", 2, "Error"),
			want: want{kind: RemoveMember, member: "c-2", reason: ReasonMemberCrashLooping, disruption: disruption.Replace}},
		{name: "second crash: not yet", mutate: crash("c-2", 1, "Error"),
			want: want{kind: Wait, reason: ReasonWaitingForHealth}},
		{name: "two restarts, not backing off (running again): not yet", mutate: func(f *Facts) {
			crash("c-2", 2, "Error")(f)
			f.m("c-2").Pod.BackOff = false
		}, want: want{kind: Wait, reason: ReasonWaitingForHealth}},
		{name: "custom threshold: not yet", mutate: func(f *Facts) { crash("c-2", 5, "Error")(f); f.Limits.CrashLoopRestarts = 6 },
			want: want{kind: Wait, reason: ReasonWaitingForHealth}},
		{name: "custom threshold", mutate: func(f *Facts) { crash("c-2", 6, "Error")(f); f.Limits.CrashLoopRestarts = 6 },
			want: want{kind: RemoveMember, member: "c-2", reason: ReasonMemberCrashLooping, disruption: disruption.Replace}},
		{name: "OOM-killed: a replacement would die the same way", mutate: crash("c-2", 50, "OOMKilled"),
			want: want{kind: Wait, reason: ReasonWaitingForHealth}},
		{name: "crash-looping leader: hand off first", mutate: func(f *Facts) {
			crash("c-1", 9, "Error")(f)
			f.lead("c-1")
			f.ep("c-1").Reachable = false
		}, want: want{kind: MoveLeader, member: "c-1", target: "c-0"}},
		{name: "crash-looping while another is down: quorum lost, only Pods come back", mutate: func(f *Facts) {
			crash("c-1", 9, "Error")(f)
			f.podGone("c-2")
		}, want: want{kind: CreatePod, member: "c-2", reason: ReasonMemberPodMissing}},
		{name: "crash-looping in 5 while another is unready: refused, wait", n: 5, mutate: func(f *Facts) {
			crash("c-1", 9, "Error")(f)
			f.m("c-3").Pod.Ready = false
		}, want: want{kind: Wait, reason: ReasonWaitingForHealth, message: "c-3"}},
		{name: "memory quorum lost: no membership change", medium: memory, mutate: func(f *Facts) {
			f.podGone("c-1")
			f.podGone("c-2")
			f.leaderless("c-0")
			f.Etcd.MemberListErr = "etcdserver: request timed out"
		}, want: want{kind: Wait, reason: ReasonQuorumLost, message: "backup"}},
		{name: "pvc quorum lost: recreate the lowest missing Pod", mutate: func(f *Facts) {
			f.podGone("c-1")
			f.podGone("c-2")
			f.Etcd.MemberListErr = "etcdserver: request timed out"
		}, want: want{kind: CreatePod, member: "c-1", reason: ReasonMemberPodMissing}},
		{name: "members unreachable with Pods present: wait and name them", mutate: func(f *Facts) {
			f.silence("c-1")
			f.silence("c-2")
		}, want: want{kind: Wait, reason: ReasonMembersUnreachable, message: "c-1, c-2"}},
		{name: "repair adopts a corrected spec first", mutate: func(f *Facts) {
			f.podGone("c-1")
			f.Cluster.Spec.Version = "3.5.33"
		}, want: want{kind: AdoptSpec, reason: ReasonSpecChanged}},
		{name: "cluster being deleted: nothing", mutate: func(f *Facts) {
			f.Cluster.DeletionTimestamp = &metav1.Time{}
			f.podGone("c-1")
		}, want: want{kind: Nothing, reason: ReasonClusterDeleting}},
	})
}
