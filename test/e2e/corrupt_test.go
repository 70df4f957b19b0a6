//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
)

// TestCorruptMemberReplaced (issue 12): a CORRUPT alarm names one follower while the others agree.
// The alarm is raised through etcd's own maintenance API, as its corruption check does when a
// member's hash differs (a real divergence takes the 5-minute check period to surface); Steward
// replaces that member through the chokepoint, disarms, and writes work again.
func TestCorruptMemberReplaced(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "db", 3, "")
	cl := clientFor(t, ns, "db")
	data := putData(t, cl, "/corrupt/", 20)
	victim := "db-1"
	if leader(t, ns, "db") == victim {
		victim = "db-2"
	}
	before := memberIDs(t, ns, "db")[victim]
	id, err := strconv.ParseUint(before, 16, 64)
	if err != nil {
		t.Fatalf("member ID %q: %v", before, err)
	}
	m := monitor(t, ns, "db", func() []string { return memberNames("db", 3) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = etcdserverpb.NewMaintenanceClient(cl.ActiveConnection()).Alarm(ctx, &etcdserverpb.AlarmRequest{
		Action: etcdserverpb.AlarmRequest_ACTIVATE, MemberID: id, Alarm: etcdserverpb.AlarmType_CORRUPT})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitMemberReplaced(t, ns, "db", victim, before, 4*time.Minute)
	waitSettled(t, ns, "db", 3, 3*time.Minute)
	measure(t, "CORRUPT on one member to replaced and settled", time.Since(start))
	checkData(t, cl, "/corrupt/", data)
	if _, err := cl.Put(context.Background(), "/corrupt/after", "ok"); err != nil {
		t.Errorf("a write after the recovery: %v", err)
	}
	assertMaxUnavailable(t, m, 1)
	removals, disarms := eventsWith(t, ns, "db", "RemoveMember"), eventsWith(t, ns, "db", "DisarmAlarm")
	if len(removals) == 0 || !strings.Contains(removals[0], "corruption check") || len(disarms) == 0 {
		t.Errorf("RemoveMember %q, DisarmAlarm %q: want the replacement naming the corruption check, then the disarm", removals, disarms)
	}
}

// waitMemberReplaced waits until the named member runs again under a new member ID, Ready.
func waitMemberReplaced(t *testing.T, ns, name, member, oldID string, within time.Duration) {
	t.Helper()
	f.WaitFor(t, ns, member+" replaced with a new member ID", within, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, name)
		if err != nil {
			return false, err
		}
		for _, mem := range ec.Status.Members {
			if mem.Name == member && mem.ID != "" && mem.ID != oldID && mem.Ready {
				return true, nil
			}
		}
		return false, fmt.Errorf("%s: %s", condition(ec, "Degraded"), condition(ec, "Progressing"))
	})
}
