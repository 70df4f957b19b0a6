//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// planStep is a numbered line of `kubectl etcd plan` that restarts a member: "2. db-2: restart …",
// "4. db-1 (leader): move leadership …, then restart …".
var planStep = regexp.MustCompile(`^\d+\. (\S+?)(?: \(leader\))?: .*restart`)

// TestPluginPlanMatchesRoll: `kubectl etcd plan` on a spec change lists the members in the order the
// operator then really rolls them, the leader last after a handoff, and changes nothing itself.
func TestPluginPlanMatchesRoll(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "pl", 3, "")
	p := newPluginCLI(t, ns)
	ec, err := get(context.Background(), ns, "pl")
	if err != nil {
		t.Fatal(err)
	}
	change := func(ec *stewardv1.EtcdCluster) { ec.Spec.Options.SnapshotCount = ptr.To[int64](7000) }
	want := ec.DeepCopy()
	change(want)
	manifest, err := yaml.Marshal(map[string]any{"apiVersion": "etcd.steward.dev/v1alpha1", "kind": "EtcdCluster",
		"metadata": map[string]any{"name": "pl"}, "spec": want.Spec})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "new.yaml")
	if err := os.WriteFile(file, manifest, 0o600); err != nil {
		t.Fatal(err)
	}
	out := p.run(t, "plan", "pl", "-f", file)
	t.Logf("plan:\n%s", out)
	var planned []string
	for _, line := range strings.Split(out, "\n") {
		if m := planStep.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			planned = append(planned, m[1])
		}
	}
	lead := leader(t, ns, "pl")
	if len(planned) != 3 || planned[2] != lead {
		t.Fatalf("plan restarts %v, want the 3 members with the leader %s last", planned, lead)
	}
	if after, _ := get(context.Background(), ns, "pl"); after.Generation != ec.Generation {
		t.Fatalf("plan changed the cluster: generation %d -> %d", ec.Generation, after.Generation)
	}

	update(t, ns, "pl", change)
	waitSettled(t, ns, "pl", 3, 6*time.Minute)
	if rolled := rolledOrder(t, ns, "pl", "DeletePod"); strings.Join(rolled, ",") != strings.Join(planned, ",") {
		t.Errorf("the roll took %v, the plan said %v", rolled, planned)
	}
}
