package kubectletcd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
