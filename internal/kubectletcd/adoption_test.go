package kubectletcd

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func adoptingCluster(sources int, replicas int32, set string) *stewardv1.EtcdCluster {
	ec := &stewardv1.EtcdCluster{}
	ec.Name = "adopted"
	ec.Spec.Replicas = &replicas
	ec.Spec.Bootstrap = &stewardv1.BootstrapSpec{Join: &stewardv1.JoinSpec{Endpoints: []string{"http://etcd:2379"}, StatefulSetName: set}}
	a := &stewardv1.AdoptionStatus{Phase: stewardv1.AdoptionPreflight, ClusterID: "c1", Version: "3.6.16",
		Checks: []stewardv1.AdoptionCheck{{Name: "Auth", Passed: true}, {Name: "Reachable", Passed: true}}}
	for i := range sources {
		s := stewardv1.SourceMember{Name: fmt.Sprintf("etcd-%d", i), ID: fmt.Sprint(i + 1), State: stewardv1.SourceServing}
		if set != "" {
			s.Pod = s.Name
		}
		a.SourceMembers = append(a.SourceMembers, s)
	}
	ec.Status.Adoption = a
	return ec
}

func TestAdoptionSteps(t *testing.T) {
	cases := []struct {
		name   string
		ec     func() *stewardv1.EtcdCluster
		want   []string // substrings, one per step, in order
		absent string
	}{
		{"3 into 3 from a StatefulSet", func() *stewardv1.EtcdCluster { return adoptingCluster(3, 3, "etcd") }, []string{
			"1. preflight passed (2 checks): cluster c1, etcd 3.6.16",
			"2. add a Steward member as a learner, promote it once it caught up (4 voters after)",
			"3. remove source member etcd-2 from etcd (leadership moved to a Steward member first if it leads); scale StatefulSet etcd to 2 and wait for Pod etcd-2 to go (3 voters after)",
			"4. add a Steward member",
			"5. remove source member etcd-1",
			"6. add a Steward member",
			"7. remove source member etcd-0 from etcd (leadership moved to a Steward member first if it leads); scale StatefulSet etcd to 0",
			"8. done: the cluster is an ordinary Steward cluster with 3 members",
		}, ""},
		{"5 into 3: spare source members go first", func() *stewardv1.EtcdCluster { return adoptingCluster(5, 3, "etcd") }, []string{
			"1. preflight passed", "2. remove source member etcd-4", "3. remove source member etcd-3", "4. add a Steward member",
			"5. remove source member etcd-2",
		}, ""},
		{"no StatefulSet: the owner stops them", func() *stewardv1.EtcdCluster { return adoptingCluster(1, 1, "") }, []string{
			"1. preflight passed", "2. add a Steward member", "3. remove source member etcd-0 from etcd (leadership moved to a Steward member first if it leads); its owner stops the process",
		}, "StatefulSet"},
		{"refused", func() *stewardv1.EtcdCluster {
			ec := adoptingCluster(3, 3, "etcd")
			ec.Status.Adoption.Phase = stewardv1.AdoptionRefused
			ec.Status.Adoption.Checks[0] = stewardv1.AdoptionCheck{Name: "Auth", Message: "etcd authentication is enabled"}
			return ec
		}, []string{"1. preflight refused at Auth: etcd authentication is enabled. Nothing of the source has changed"}, "add a Steward"},
		{"mid-way: one source removed, one Steward voter", func() *stewardv1.EtcdCluster {
			ec := adoptingCluster(3, 3, "etcd")
			ec.Status.Adoption.Phase = stewardv1.AdoptionHandingOver
			ec.Status.Adoption.SourceMembers[2].State = stewardv1.SourceStopped
			ec.Status.Members = []stewardv1.MemberStatus{{Name: "adopted-0", Role: stewardv1.RoleLeader}}
			return ec
		}, []string{"1. add a Steward member as a learner, promote it once it caught up (4 voters after)", "2. remove source member etcd-1"}, "preflight"},
		{"abort", func() *stewardv1.EtcdCluster {
			ec := adoptingCluster(3, 3, "etcd")
			ec.Spec.Bootstrap.Join.Abort = true
			return ec
		}, []string{"1. preflight passed", "2. abort: remove Steward's members"}, "add a Steward"},
		{"done", func() *stewardv1.EtcdCluster {
			ec := adoptingCluster(3, 3, "etcd")
			ec.Status.Adoption.Phase = stewardv1.AdoptionDone
			return ec
		}, []string{"1. the adoption is done"}, ""},
		{"paused", func() *stewardv1.EtcdCluster {
			ec := adoptingCluster(1, 1, "etcd")
			ec.Spec.Paused = true
			return ec
		}, []string{"1. preflight", "2. add", "3. remove", "4. done", "5. spec.paused is set"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := AdoptionSteps(tc.ec())
			if len(got) < len(tc.want) {
				t.Fatalf("%d steps, want at least %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("step %d = %q, want it to begin %q", i+1, got[i], w)
				}
			}
			if all := strings.Join(got, "\n"); tc.absent != "" && strings.Contains(all, tc.absent) {
				t.Errorf("steps mention %q:\n%s", tc.absent, all)
			}
		})
	}
	if AdoptionSteps(fixtureCluster()) != nil {
		t.Error("a cluster that is not adopting has adoption steps")
	}
}

func TestStatusShowsAdoption(t *testing.T) {
	ec := adoptingCluster(2, 3, "etcd")
	ec.Status.Adoption.Phase = stewardv1.AdoptionHandingOver
	ec.Status.Adoption.Message = "handing over: removing source member etcd-1 from etcd"
	ec.Status.Adoption.SourceMembers[1].State = stewardv1.SourceRemoved
	var b bytes.Buffer
	if err := RenderStatus(&b, Status{Cluster: "adopted", Adoption: ec.Status.Adoption}, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Adoption:", "HandingOver: handing over: removing source member etcd-1 from etcd",
		"Source members:", "etcd-0 Serving (Pod etcd-0), etcd-1 Removed (Pod etcd-1)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
}
