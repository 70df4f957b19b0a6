package plan

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/health"
)

type condWant struct {
	typ     string
	status  metav1.ConditionStatus
	reason  Reason
	message string
}

// TestConditions: issue 4 (Available, Degraded, Progressing) and issue 5 (RollingUpdate) reasons.
func TestConditions(t *testing.T) {
	tests := []struct {
		name   string
		n      int32
		medium stewardv1.StorageMedium
		mutate func(f *Facts)
		want   []condWant
	}{
		{name: "healthy", want: []condWant{
			{ConditionAvailable, "True", ReasonQuorumHealthy, "3 of 3"},
			{ConditionDegraded, "False", ReasonAllMembersHealthy, ""},
			{ConditionProgressing, "False", ReasonReconciled, ""},
			{ConditionRollingUpdate, "False", ReasonUpToDate, ""},
		}},
		{name: "not formed", mutate: func(f *Facts) {
			f.Members, f.Etcd, f.Cluster.Status.ClusterID = nil, health.Facts{MemberListErr: "refused"}, ""
		}, want: []condWant{
			{ConditionAvailable, "False", ReasonBootstrapping, ""},
			{ConditionProgressing, "True", ReasonBootstrapping, ""},
		}},
		{name: "one Pod missing: degraded, names it", mutate: func(f *Facts) { f.podGone("c-1") }, want: []condWant{
			{ConditionAvailable, "True", ReasonQuorumHealthy, "2 of 3"},
			{ConditionDegraded, "True", ReasonMemberPodMissing, "c-1: Pod missing"},
			{ConditionProgressing, "True", ReasonMemberPodMissing, "c-1"},
		}},
		{name: "quorum lost", medium: memory, mutate: func(f *Facts) {
			f.podGone("c-1")
			f.podGone("c-2")
			f.leaderless("c-0")
			f.Etcd.MemberListErr = "timeout"
		}, want: []condWant{
			{ConditionAvailable, "False", ReasonQuorumLost, "timeout"},
			{ConditionDegraded, "True", ReasonMemberUnhealthy, "c-0: etcd endpoint unhealthy; c-1: Pod missing; c-2: Pod missing"},
			{ConditionProgressing, "False", ReasonQuorumLost, "no membership change"},
		}},
		// The operator reaches one member of three, which still has a leader: etcd serves, the
		// operator only cannot see it (issue 23: its reachability is not etcd's quorum).
		{name: "the operator reaches one member, which has a leader", mutate: func(f *Facts) { f.silence("c-1"); f.silence("c-2") },
			want: []condWant{{ConditionAvailable, "True", ReasonMembersUnreachable, "etcd shows quorum: c-0 serves a linearizable read; " +
				"the operator cannot reach c-1, c-2 (no answer); the operator sees 1 of 3 voters healthy"},
				{ConditionQuorumRecovery, "False", ReasonMembersUnreachable, "no recovery is needed"}}},
		{name: "the operator reaches one leaderless member: quorum unknown", mutate: func(f *Facts) {
			f.silence("c-1")
			f.silence("c-2")
			f.leaderless("c-0")
			f.Etcd.MemberListErr = "context deadline exceeded"
		}, want: []condWant{{ConditionAvailable, "Unknown", ReasonMembersUnreachable, "quorum unknown: 1 of 3 voters"},
			{ConditionProgressing, "False", ReasonMembersUnreachable, "cannot reach c-1, c-2"},
			{ConditionQuorumRecovery, "False", ReasonMembersUnreachable, "no recovery runs on silence"}}},
		{name: "OOM-killed", mutate: func(f *Facts) {
			f.crashing("c-2", 9, "OOMKilled")
		}, want: []condWant{{ConditionDegraded, "True", ReasonMemberOOMKilled, "resources.limits.memory"}}},
		{name: "crash-looping", mutate: func(f *Facts) {
			f.crashing("c-2", 9, "Error")
		}, want: []condWant{{ConditionDegraded, "True", ReasonMemberCrashLooping, "restarted 9 times"}}},
		{name: "unschedulable", mutate: func(f *Facts) { f.m("c-2").Pod.Unschedulable = true },
			want: []condWant{{ConditionDegraded, "True", ReasonMemberUnschedulable, "c-2"}}},
		{name: "endpoint unhealthy though the Pod is ready", mutate: func(f *Facts) { f.ep("c-1").Healthy = false },
			want: []condWant{{ConditionDegraded, "True", ReasonMemberUnhealthy, "c-1: etcd endpoint unhealthy"}}},
		{name: "an unknown member", mutate: func(f *Facts) {
			f.Etcd.Members = append(f.Etcd.Members, health.Member{ID: 0x42, PeerURLs: []string{"http://x:2380"}})
		}, want: []condWant{{ConditionDegraded, "True", ReasonMemberUnhealthy, "unknown-member-42"}}},
		{name: "rolling", mutate: func(f *Facts) { f.retarget(cpu("1")) }, want: []condWant{
			{ConditionRollingUpdate, "True", ReasonRollingMember, "restarting c-2"},
			{ConditionProgressing, "True", ReasonRollingMember, ""},
		}},
		{name: "waiting for health mid-roll", mutate: func(f *Facts) {
			f.retarget(cpu("1"))
			cpu("1")(&f.m("c-2").Template)
			f.ep("c-2").ReadOK = false
		}, want: []condWant{{ConditionRollingUpdate, "True", ReasonWaitingForHealth, "LinearizableRead"}}},
		{name: "blocked", n: 1, medium: memory, mutate: func(f *Facts) { f.retarget(cpu("1")) },
			want: []condWant{
				{ConditionRollingUpdate, "True", ReasonBlocked, "never rolled"},
				{ConditionProgressing, "False", ReasonBlocked, "never rolled"},
			}},
		{name: "OnDelete", mutate: func(f *Facts) {
			f.retarget(cpu("1"))
			f.Cluster.Spec.UpdateStrategy.Type = stewardv1.OnDelete
		}, want: []condWant{{ConditionRollingUpdate, "True", ReasonWaitingForDeletion, "c-2, c-1, c-0"}}},
		{name: "paused with a pending change", mutate: func(f *Facts) {
			f.Cluster.Spec.Version = "3.5.33"
			f.Cluster.Spec.Paused = true
		}, want: []condWant{
			{ConditionRollingUpdate, "True", ReasonPaused, "c-0, c-1, c-2"},
			{ConditionProgressing, "False", ReasonPaused, "AdoptSpec"},
		}},
		{name: "updated but not recovered after a roll", mutate: func(f *Facts) {
			meta.SetStatusCondition(&f.Cluster.Status.Conditions, metav1.Condition{Type: ConditionRollingUpdate, Status: "True", Reason: "RollingMember"})
			f.ep("c-0").ReadOK = false
		}, want: []condWant{{ConditionRollingUpdate, "True", ReasonWaitingForHealth, "every member is updated"}}},
		{name: "dormant", mutate: func(f *Facts) {
			f.setReplicas(0)
			for _, n := range []string{"c-0", "c-1", "c-2"} {
				f.podGone(n)
			}
			f.Etcd.MemberListErr = "refused"
		}, want: []condWant{
			{ConditionAvailable, "False", ReasonDormant, ""},
			{ConditionDegraded, "False", ReasonAllMembersHealthy, ""},
			{ConditionProgressing, "False", ReasonDormant, ""},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := planFor(t, tt.n, tt.medium, tt.mutate)
			for _, w := range tt.want {
				c := d.Condition(w.typ)
				if c.Status != w.status || c.Reason != string(w.reason) || !strings.Contains(c.Message, w.message) {
					t.Errorf("%s = %s %s %q; want %s %s ~%q", w.typ, c.Status, c.Reason, c.Message, w.status, w.reason, w.message)
				}
			}
			if len(d.Conditions) != 6 {
				t.Errorf("%d conditions, want Available, Progressing, Degraded, RollingUpdate, QuorumRecovery, PlacementAtRisk", len(d.Conditions))
			}
		})
	}
}

func TestStatusMembers(t *testing.T) {
	f := healthyFacts(t, 3, "")
	f.retarget(cpu("1"))
	cpu("1")(&f.m("c-2").Template)
	cpu("1")(f.m("c-2").Pod.Template)
	f.ep("c-1").Healthy = false
	d := Plan(f)
	if d.ReadyMembers != 2 || d.UpdatedMembers != 1 {
		t.Errorf("ready %d, updated %d; want 2, 1", d.ReadyMembers, d.UpdatedMembers)
	}
	if got := strings.Join(d.Outdated, ","); got != "c-0,c-1" {
		t.Errorf("outdated %s", got)
	}
	roles := map[string]stewardv1.MemberRole{}
	for _, m := range d.Members {
		roles[m.Name] = m.Role
		if m.ID == "" || m.Version == "" {
			t.Errorf("%s: ID %q, version %q", m.Name, m.ID, m.Version)
		}
		if m.Updated != (m.Name == "c-2") || m.Ready != (m.Name != "c-1") {
			t.Errorf("%+v", m)
		}
	}
	if roles["c-0"] != stewardv1.RoleLeader || roles["c-1"] != stewardv1.RoleFollower {
		t.Errorf("roles %v", roles)
	}
	if d.Changes["c-0"] != ChangeRoll || d.Changes["c-2"] != 0 {
		t.Errorf("changes %v", d.Changes)
	}
	if d.Gate.Passed() || d.Gate.Member != "c-1" {
		t.Errorf("gate %v", d.Gate)
	}
}

func TestStatusLearnerRole(t *testing.T) {
	f := healthyFacts(t, 3, "")
	f.setReplicas(4)
	f.newMember(3, stewardv1.MemberLearner).Pod = Pod{Exists: true}
	f.addLearner("c-3", false)
	d := Plan(f)
	for _, m := range d.Members {
		if m.Name == "c-3" && (m.Role != stewardv1.RoleLearner || m.Ready) {
			t.Errorf("learner status %+v", m)
		}
	}
}

func TestVersionWarning(t *testing.T) {
	f := healthyFacts(t, 3, "")
	f.retarget(func(t *stewardv1.MemberTemplate) { t.Version = "3.6.0-custom.build" })
	if d := Plan(f); d.VersionWarning != "" {
		t.Errorf("a suffix is still X.Y.Z: %q", d.VersionWarning)
	}
	f.m("c-1").Template.Version = "nightly"
	d := Plan(f)
	if !strings.Contains(d.VersionWarning, "nightly") {
		t.Errorf("warning %q does not name the unparseable version", d.VersionWarning)
	}
	if d.Action.Kind == Wait && d.Action.Reason == ReasonBlocked {
		t.Errorf("an unparseable version is accepted, not blocked")
	}
}

// TestDisruptionView: the chokepoint sees what the plan saw.
func TestDisruptionView(t *testing.T) {
	f := healthyFacts(t, 3, memory)
	f.Cluster.Spec.UpdateStrategy.AllowDowntime = true
	f.memberPhase("c-2", stewardv1.MemberRemoving)
	f.m("c-1").Pod.Ready = false
	f.Etcd.Members = append(f.Etcd.Members, health.Member{ID: 0x42, IsLearner: true, PeerURLs: []string{"http://x:2380"}})
	c := f.DisruptionView()
	if c.Medium != memory || !c.AllowDowntime || c.Dormant || !c.MemberListKnown {
		t.Errorf("cluster fields %+v", c)
	}
	byName := map[string]disruption.Member{}
	for _, m := range c.Members {
		byName[m.Name] = m
	}
	if m := byName["c-0"]; !m.Leader || !m.Voter || !m.Healthy || m.ID == 0 || m.InFlight {
		t.Errorf("c-0 %+v", m)
	}
	if m := byName["c-1"]; m.PodReady || !m.PodExists {
		t.Errorf("c-1 %+v", m)
	}
	if m := byName["c-2"]; m.InFlight || m.Replacing || !m.Voter {
		t.Errorf("a member whose removal is only intended is judged by what it does: %+v", m)
	}
	f2 := healthyFacts(t, 3, memory)
	f2.memberPhase("c-2", stewardv1.MemberRemoving)
	f2.dropLive("c-2")
	if m := byNameOf(f2.DisruptionView(), "c-2"); !m.InFlight || !m.Replacing {
		t.Errorf("a member out of etcd to be replaced is disrupted: %+v", m)
	}
	f2.memberPhase("c-2", stewardv1.MemberPending)
	f2.m("c-2").Replacing = true
	if m := byNameOf(f2.DisruptionView(), "c-2"); !m.Replacing {
		t.Errorf("a replacement not yet a voter is disrupted: %+v", m)
	}
	if m := byName["unknown-member-42"]; !m.Learner || m.Healthy {
		t.Errorf("orphan %+v", m)
	}
	f.Etcd.MemberListErr = "timeout"
	f.setReplicas(0)
	if c := f.DisruptionView(); c.MemberListKnown || !c.Dormant || byNameOf(c, "c-0").Voter {
		t.Errorf("without a member list nobody is known to be a voter: %+v", c)
	}
}

func byNameOf(c disruption.Cluster, n string) disruption.Member {
	for _, m := range c.Members {
		if m.Name == n {
			return m
		}
	}
	return disruption.Member{}
}

func TestActionString(t *testing.T) {
	a := Action{Kind: MoveLeader, Member: "c-0", Target: "c-1", Reason: ReasonMovingLeader}
	if s := a.String(); s != "MoveLeader c-0 -> c-1 (MovingLeader)" {
		t.Errorf("%q", s)
	}
	if s := (Action{Kind: CreateMember, Member: "c-3", Ordinal: 3}).String(); s != "CreateMember c-3 #3" {
		t.Errorf("%q", s)
	}
	if (Action{Kind: Wait}).Acts() || (Action{Kind: Nothing}).Acts() || !(Action{Kind: DeletePod}).Acts() {
		t.Errorf("Is() wrong")
	}
}
