package resources

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
	etcdCommandIs(t, p, "/steward-tools/steward-member run-etcd --data-dir=/var/lib/etcd/data --marker=/steward-tools/started "+
		"--member-id=8e9e05c52164694d --expect-data -- /usr/local/bin/etcd")
	m.ToolsImage = ""
	if p := Pod(m, "r"); len(p.Spec.InitContainers) != 0 || p.Spec.Containers[0].Command[0] != EtcdBinary {
		t.Errorf("without the image: %v %v", p.Spec.InitContainers, p.Spec.Containers[0].Command)
	}
}

// Where the cluster mounts image volumes, the Steward image is one: no init container copies the
// member binary, etcd's container runs it from the read-only mount and marks its start in the
// Pod's own writable volume.
func TestPodRunsTheMemberBinaryFromAnImageVolume(t *testing.T) {
	ec := cluster(nil)
	m := Member{Cluster: ec, Name: "demo-1", Template: &ec.Spec.MemberTemplate, ToolsImage: "steward:dev", ToolsFromImage: true,
		Bootstrap: Bootstrap{InitialCluster: "x", State: StateExisting, MemberID: "8e9e05c52164694d"}}
	p := Pod(m, "gcr.io/etcd-development/etcd")
	if len(p.Spec.InitContainers) != 0 {
		t.Errorf("init containers %+v, want none", p.Spec.InitContainers)
	}
	var image, tools bool
	for _, v := range p.Spec.Volumes {
		switch {
		case v.Name == imageVolume && v.Image != nil:
			image = v.Image.Reference == "steward:dev" && v.Image.PullPolicy == "IfNotPresent"
		case v.Name == toolsVolume && v.EmptyDir != nil:
			tools = true
		}
	}
	if !image || !tools {
		t.Errorf("volumes %+v: want the Steward image (IfNotPresent) and an emptyDir", p.Spec.Volumes)
	}
	mounts := map[string]string{}
	for _, vm := range p.Spec.Containers[0].VolumeMounts {
		mounts[vm.Name] = vm.MountPath + map[bool]string{true: " ro", false: " rw"}[vm.ReadOnly]
	}
	if mounts[imageVolume] != "/steward-image ro" || mounts[toolsVolume] != "/steward-tools rw" {
		t.Errorf("etcd's mounts %v", mounts)
	}
	etcdCommandIs(t, p, "/steward-image/steward-member run-etcd --data-dir=/var/lib/etcd/data --marker=/steward-tools/started "+
		"--member-id=8e9e05c52164694d -- /usr/local/bin/etcd")
}

func etcdCommandIs(t *testing.T, p *corev1.Pod, want string) {
	t.Helper()
	if cmd := strings.Join(p.Spec.Containers[0].Command, " "); cmd != want {
		t.Errorf("command %q\nwant    %q", cmd, want)
	}
}

func TestImageVolumesNeedTheServerAndEveryNodesRuntime(t *testing.T) {
	for _, tc := range []struct {
		name     string
		server   string
		runtimes map[string]string
		want     bool
		why      string
	}{
		{"containerd 2.1 and 1.35", "v1.35.0", map[string]string{"a": "containerd://2.1.0", "b": "containerd://2.4.2"}, true, ""},
		{"CRI-O 1.31", "v1.37.2", map[string]string{"a": "cri-o://1.31.4"}, true, ""},
		{"a provider's minor with a plus", "v1.36.1-gke.100", map[string]string{"a": "containerd://2.1.4-gke.1"}, true, ""},
		{"one node on containerd 2.0", "v1.37.2", map[string]string{"a": "containerd://2.1.0", "b": "containerd://2.0.5"}, false, "node b runs"},
		{"containerd 1.7 with a suffix", "v1.37.2", map[string]string{"a": "containerd://1.7.22-k3s1"}, false, "node a runs"},
		{"the local cluster before", "v1.37.2", map[string]string{"node-1": "containerd://1.6.20~ds1"}, false, "node node-1 runs"},
		{"CRI-O 1.30", "v1.37.2", map[string]string{"a": "cri-o://1.30.2"}, false, "node a runs"},
		{"another runtime", "v1.37.2", map[string]string{"a": "docker://27.0.1"}, false, "node a runs"},
		{"a node that does not say", "v1.37.2", map[string]string{"a": ""}, false, "node a runs"},
		{"no node", "v1.37.2", nil, false, "no node"},
		{"the API server 1.34", "v1.34.3", map[string]string{"a": "containerd://2.4.2"}, false, "the API server"},
		{"an unreadable server version", "", map[string]string{"a": "containerd://2.4.2"}, false, "the API server"},
	} {
		got, why := ImageVolumes(tc.server, tc.runtimes)
		if got != tc.want || !strings.HasPrefix(why, tc.why) {
			t.Errorf("%s: %v %q, want %v %q...", tc.name, got, why, tc.want, tc.why)
		}
	}
}
