package memberbinary_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	"github.com/etcd-steward/steward/internal/memberbinary"
	"github.com/etcd-steward/steward/internal/testenv"
)

// The auto decision against a real API server (1.37): no node, then nodes whose runtimes say
// containerd 2.4 (image volumes), then one more on containerd 1.7 (copy again); a decision stands
// for its period; image and copy never read anything.
func TestMemberBinaryVolumeFollowsTheNodes(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()
	disco, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	addNode := func(name, runtime string) {
		t.Helper()
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := env.Client.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		n.Status.NodeInfo.ContainerRuntimeVersion = runtime
		if err := env.Client.Status().Update(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	always := &memberbinary.Chooser{Mode: memberbinary.Auto, Nodes: env.Client, Server: disco, Every: time.Nanosecond}
	if always.FromImage(ctx) {
		t.Error("no node: image volumes, want the copy")
	}
	addNode("a", "containerd://2.4.2")
	addNode("b", "cri-o://1.31.4")
	if !always.FromImage(ctx) {
		t.Error("containerd 2.4.2 and CRI-O 1.31.4 on a 1.37 API server: the copy, want image volumes")
	}
	standing := &memberbinary.Chooser{Mode: memberbinary.Auto, Nodes: env.Client, Server: disco, Every: time.Hour}
	if !standing.FromImage(ctx) {
		t.Fatal("the standing decision started with the copy")
	}
	addNode("c", "containerd://1.7.22")
	if always.FromImage(ctx) {
		t.Error("a node on containerd 1.7: image volumes, want the copy")
	}
	if !standing.FromImage(ctx) {
		t.Error("a decision of an hour changed at once")
	}
	// Forced modes: neither a lister nor a server is asked (nil would panic).
	if !(&memberbinary.Chooser{Mode: memberbinary.Image}).FromImage(ctx) || (&memberbinary.Chooser{Mode: memberbinary.Copy}).FromImage(ctx) {
		t.Error("image must mount, copy must copy, whatever the nodes")
	}
}
