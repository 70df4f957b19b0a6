//go:build e2e

package e2e

import (
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
	ns := breakAndReplace(t, "rm -rf "+resources.DataMountPath+"/data/member && kill 1",
		"a PVC member whose data directory was emptied", 4*time.Minute)
	removals := eventsWith(t, ns, "db", "RemoveMember")
	if len(removals) == 0 || !strings.Contains(removals[0], "its data directory fails the check (Empty") {
		t.Errorf("RemoveMember events %q: want the replacement to name the failed data check", removals)
	}
}
