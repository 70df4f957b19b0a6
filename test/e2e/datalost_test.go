//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/resources"
)

// TestRepairDataLost (issue 12, item 6): a PVC member's data directory is emptied under its
// running etcd, which is then killed. Restarted in place on the empty directory, etcd would rejoin
// under its old ID with no log and no memory of its votes; the data check refuses to start it, and
// the operator replaces the member (remove, wipe, fresh learner) while the others keep quorum.
func TestRepairDataLost(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "db", 3, "")
	cl := clientFor(t, ns, "db")
	data := putData(t, cl, "/lost/", 20)
	victim := "db-1"
	if leader(t, ns, "db") == victim {
		victim = "db-2"
	}
	before := memberIDs(t, ns, "db")[victim]
	m := monitor(t, ns, "db", func() []string { return memberNames("db", 3) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := f.Kubectl(ctx, "-n", ns, "exec", victim, "--", "sh", "-c",
		"rm -rf "+resources.DataMountPath+"/data/member && kill 1")
	if err != nil && !strings.Contains(err.Error(), "exit code 137") && !strings.Contains(err.Error(), "terminated") {
		t.Logf("exec (expected to end with the process): %v %s", err, out)
	}
	start := time.Now()
	f.WaitFor(t, ns, victim+" replaced with a new member ID", 4*time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, "db")
		if err != nil {
			return false, err
		}
		for _, mem := range ec.Status.Members {
			if mem.Name == victim && mem.ID != "" && mem.ID != before && mem.Ready {
				return true, nil
			}
		}
		return false, fmt.Errorf("%s: %s", condition(ec, "Degraded"), condition(ec, "Progressing"))
	})
	waitSettled(t, ns, "db", 3, 3*time.Minute)
	measure(t, "replace a PVC member whose data directory was emptied", time.Since(start))
	checkData(t, cl, "/lost/", data)
	assertMaxUnavailable(t, m, 1)
	removals := eventsWith(t, ns, "db", "RemoveMember")
	if len(removals) == 0 || !strings.Contains(removals[0], "its data directory fails the check (Empty") {
		t.Errorf("RemoveMember events %q: want the replacement to name the failed data check", removals)
	}
}
