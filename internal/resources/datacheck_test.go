package resources

import (
	"strings"
	"testing"
)

// With the Steward image, etcd starts through the data check, restarts in place included; the
// member's ID and whether it had data ride along.
func TestPodStartsThroughTheDataCheck(t *testing.T) {
	ec := cluster(nil)
	m := Member{Cluster: ec, Name: "demo-1", Template: &ec.Spec.MemberTemplate, ToolsImage: "steward:dev",
		Bootstrap: Bootstrap{InitialCluster: "x", State: StateExisting, MemberID: "8e9e05c52164694d", ExpectData: true}}
	p := Pod(m, "gcr.io/etcd-development/etcd")
	if len(p.Spec.InitContainers) != 1 || p.Spec.InitContainers[0].Image != "steward:dev" {
		t.Fatalf("init containers %+v", p.Spec.InitContainers)
	}
	if got := strings.Join(p.Spec.InitContainers[0].Command, " "); got != "/steward-member install-self /steward-tools/steward-member" {
		t.Errorf("the init container copies %q, want the member binary", got)
	}
	cmd := strings.Join(p.Spec.Containers[0].Command, " ")
	want := "/steward-tools/steward-member run-etcd --data-dir=/var/lib/etcd/data --marker=/steward-tools/started " +
		"--member-id=8e9e05c52164694d --expect-data -- /usr/local/bin/etcd"
	if cmd != want {
		t.Errorf("command %q\nwant    %q", cmd, want)
	}
	m.ToolsImage = ""
	if p := Pod(m, "r"); len(p.Spec.InitContainers) != 0 || p.Spec.Containers[0].Command[0] != EtcdBinary {
		t.Errorf("without the image: %v %v", p.Spec.InitContainers, p.Spec.Containers[0].Command)
	}
}
