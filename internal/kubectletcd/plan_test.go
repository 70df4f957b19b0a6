package kubectletcd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func TestPlan(t *testing.T) {
	ec := fixtureCluster()
	objs := []client.Object{ec}
	for _, m := range fixtureMembers() {
		m.Spec.Template = ec.Spec.MemberTemplate
		objs = append(objs, &m)
	}
	h := newHarness(t, nil, objs...)
	next := fixtureCluster()
	next.Status = stewardv1.EtcdClusterStatus{}
	next.Spec.Version = "3.6.17"
	next.Spec.Replicas = new(int32)
	*next.Spec.Replicas = 5
	data, err := yaml.Marshal(next)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "new.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := h.run(t, "plan", "demo", "-f", file); err != nil {
		t.Fatal(err)
	}
	golden(t, "plan.golden", h.out.Bytes())
	if got, _ := getCluster(t.Context(), h.env, "demo"); got.Spec.Version != "3.6.16" {
		t.Fatalf("plan changed the cluster: version %s", got.Spec.Version)
	}

	next.Name = "other"
	data, _ = yaml.Marshal(next)
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := h.run(t, "plan", "demo", "-f", file); err == nil || !strings.Contains(err.Error(), `describes etcdcluster "other"`) {
		t.Fatalf("a file for another cluster: %v", err)
	}
}

// TestPlanStepsFollowThePlanner: resizes in place go before any rebuild, and rebuilds follow the
// planner's roll order (plan.SortForRoll). Before, the plugin sorted every change in one list of its
// own, so a resize of demo-0 was printed after demo-2's restart (issue 24).
func TestPlanStepsFollowThePlanner(t *testing.T) {
	live := fixtureCluster()
	live.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	next := live.DeepCopy()
	next.Spec.Version = "3.6.17"
	next.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	var members []stewardv1.EtcdMember
	for _, m := range fixtureMembers() {
		if m.Spec.ClusterName != "demo" {
			continue
		}
		m.Spec.Template = live.Spec.MemberTemplate
		if m.Name == "demo-0" { // already on the new version: only its resources change
			m.Spec.Template.Version = "3.6.17"
		}
		members = append(members, m)
	}
	got := strings.Join(PlanSteps(live, next, members), "\n")
	want := strings.Join([]string{
		"1. version 3.6.16 -> 3.6.17 (Patch step)",
		"2. demo-0: resize CPU/memory in the running Pod, no restart",
		"3. demo-2: restart it on the new template (its PVC and member ID stay)",
		"4. demo-1 (leader): move leadership to a follower, then restart it on the new template",
	}, "\n")
	if got != want {
		t.Errorf("PlanSteps:\n%s\nwant:\n%s", got, want)
	}
}

// TestPlanStepsMemoryAddFirst: memory members are replaced add-first (spec.updateStrategy.maxSurge
// unset or 1), remove-first with maxSurge 0 or when the member is not ready.
func TestPlanStepsMemoryAddFirst(t *testing.T) {
	live := fixtureCluster()
	live.Spec.Storage.Medium = stewardv1.StorageMediumMemory
	var members []stewardv1.EtcdMember
	for _, m := range fixtureMembers() {
		if m.Spec.ClusterName == "demo" {
			m.Spec.Template = live.Spec.MemberTemplate
			members = append(members, m)
		}
	}
	next := live.DeepCopy()
	next.Spec.Version = "3.6.17"
	got := strings.Join(PlanSteps(live, next, members), "\n")
	for _, want := range []string{
		"demo-2: replace it add-first (memory storage: a new member on the new template joins as a learner and is promoted, then demo-2 is removed)",
		"demo-1 (leader): replace it add-first (memory storage: a new member on the new template joins as a learner and is promoted, then demo-1 is removed after leadership moved)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("PlanSteps:\n%s\nwant a line:\n%s", got, want)
		}
	}
	next.Spec.UpdateStrategy.MaxSurge = ptr.To[int32](0)
	if got := strings.Join(PlanSteps(live, next, members), "\n"); !strings.Contains(got, "demo-2: replace it (memory storage: remove, add a learner") {
		t.Errorf("maxSurge 0: PlanSteps:\n%s", got)
	}
}

// TestPlanStepsMemoryScaleInMidRoll: a memory scale-in mid-roll removes outdated members first, in
// the roll's order, before it replaces the rest (the planner's surplus), not the highest ordinals.
func TestPlanStepsMemoryScaleInMidRoll(t *testing.T) {
	live := fixtureCluster()
	live.Spec.Storage.Medium = stewardv1.StorageMediumMemory
	live.Spec.Replicas = ptr.To[int32](5)
	next := live.DeepCopy()
	next.Spec.Version = "3.6.17"
	next.Spec.Replicas = ptr.To[int32](3)
	var members []stewardv1.EtcdMember
	for i := range 5 {
		name := fmt.Sprintf("demo-%d", i)
		m := stewardv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "db"},
			Spec: stewardv1.EtcdMemberSpec{ClusterName: "demo", Ordinal: int32(i), Template: live.Spec.MemberTemplate}}
		if i >= 3 { // demo-3 and demo-4 run the new template already
			m.Spec.Template = next.Spec.MemberTemplate
			live.Status.Members = append(live.Status.Members, stewardv1.MemberStatus{Name: name, Role: stewardv1.RoleFollower, Ready: true})
		}
		members = append(members, m)
	}
	got := strings.Join(PlanSteps(live, next, members), "\n")
	want := strings.Join([]string{
		"1. version 3.6.16 -> 3.6.17 (Patch step)",
		"2. remove member demo-2 (leadership moved away first if it leads)",
		"3. remove member demo-0 (leadership moved away first if it leads)",
		"4. demo-1 (leader): replace it add-first (memory storage: a new member on the new template joins as a learner and is " +
			"promoted, then demo-1 is removed after leadership moved)",
	}, "\n")
	if got != want {
		t.Errorf("PlanSteps:\n%s\nwant:\n%s", got, want)
	}
}

// A one-minor downgrade is planned through etcd's protocol, leader last; two minors, or a patch
// below etcd's minimum before an upgrade, are refused with the path.
func TestPlanStepsVersionPaths(t *testing.T) {
	members := func(live *stewardv1.EtcdCluster) []stewardv1.EtcdMember {
		var out []stewardv1.EtcdMember
		for _, m := range fixtureMembers() {
			if m.Spec.ClusterName == "demo" {
				m.Spec.Template = live.Spec.MemberTemplate
				out = append(out, m)
			}
		}
		return out
	}
	for _, tc := range []struct{ from, to, want string }{
		{"3.7.3", "3.6.16", "2. through etcd's downgrade protocol: a backup first (when an EtcdBackupSchedule backs the cluster up), then etcd downgrade validate and enable 3.6\n" +
			"3. wait until every member reports storage version 3.6.0; the members then roll leader last\n" +
			"4. demo-2: restart it on the new template"},
		{"3.6.16", "3.5.35", "2. through etcd's downgrade protocol: a backup first (when an EtcdBackupSchedule backs the cluster up), then etcd downgrade validate and enable 3.5\n" +
			"3. wait until every member reports storage version 3.5.0; the members then roll leader last\n" +
			"4. demo-2: restart it on the new template"},
		{"3.7.3", "3.5.35", "2. refused: etcd downgrades one minor version at a time: set spec.version to a 3.6 release first"},
		{"3.5.30", "3.6.16", "2. refused: etcd's upgrade guide asks every 3.5 member to run 3.5.32 or later before 3.6"},
	} {
		live := fixtureCluster()
		live.Spec.Version = tc.from
		next := live.DeepCopy()
		next.Spec.Version = tc.to
		got := strings.Join(PlanSteps(live, next, members(live)), "\n")
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s -> %s:\n%s\nwant it to contain:\n%s", tc.from, tc.to, got, tc.want)
		}
	}
}
