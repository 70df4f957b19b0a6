//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
)

// TestDefragmentation: a fragmented 3-member TLS cluster is defragmented by the threshold rule
// under client traffic: one member at a time, followers first, the leader last after handing
// leadership away; every file shrinks and no acknowledged write is lost.
func TestDefragmentation(t *testing.T) {
	t.Parallel()
	// etcd auth on (issue 29): defragmentation and leadership moves are root's alone.
	ns := settledCluster(t, "web", 3, "", authOn)
	waitAuthOf(t, ns, "web", "auth on", 2*time.Minute, func(a *stewardv1.AuthStatus) bool { return a.Phase == "On" })
	// With auth on, compaction is root's alone (etcd checks it at its gRPC layer, 3.5.35, 3.6 and
	// 3.7 alike): the shared client's full-access role is refused, so the fill and its compaction
	// go through the backups' certificate (root).
	c := clientWith(t, ns, "web", f.ClientTLS(t, ns, resources.BackupTLSSecretName("web")))
	if _, err := clientFor(t, ns, "web").Compact(context.Background(), 1); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("the shared client compacting with auth on: %v, want permission denied (root only)", err)
	}
	fragment(t, c, "/bulk/", 24)
	initialLeader := leader(t, ns, "web")

	w := watchRoll(t, ns, "web", 3)
	w.change(func(ec *stewardv1.EtcdCluster) {
		ec.Spec.Maintenance = &stewardv1.MaintenanceSpec{Defragmentation: stewardv1.DefragmentationSpec{
			MinDBSize: ptr.To(resource.MustParse("16Mi"))}}
	})
	var done []stewardv1.MemberStatus
	f.WaitFor(t, ns, "every member defragmented", 4*time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, "web")
		if err != nil {
			return false, err
		}
		done = done[:0]
		for _, m := range ec.Status.Members {
			if d := m.Defragmentation; d != nil && d.Last != nil {
				if d.Last.Outcome != stewardv1.DefragmentationSucceeded {
					return false, fmt.Errorf("%s: %s %s", m.Name, d.Last.Outcome, d.Last.Message)
				}
				done = append(done, m)
			}
		}
		return len(done) == 3, fmt.Errorf("%d of 3 defragmented", len(done))
	})
	waitSettled(t, ns, "web", 3, 2*time.Minute)
	w.finish("defragmentation of 3 members", 1)

	for _, m := range done {
		d := m.Defragmentation.Last
		if d.SizeBefore == nil || d.SizeAfter == nil || d.SizeAfter.Value()*2 > d.SizeBefore.Value() {
			t.Errorf("%s: %v -> %v: the file did not shrink by half", m.Name, d.SizeBefore, d.SizeAfter)
		}
		t.Logf("MEASURE defragmentation %s: %s -> %s in %d ms", m.Name, d.SizeBefore, d.SizeAfter, d.DurationMilliseconds)
	}
	events := eventsWith(t, ns, "web", "Defragmented")
	if len(events) != 3 {
		t.Fatalf("Defragmented events: %q, want one per member", events)
	}
	moves := eventsWith(t, ns, "web", "MoveLeader")
	if len(moves) == 0 || !strings.Contains(moves[0], "before defragmenting it") {
		t.Fatalf("MoveLeader events %q: leadership must be handed off before the leader is defragmented", moves)
	}
	// Leadership can also move on its own under load; the order is judged when it did not.
	if strings.Contains(moves[0], "from "+initialLeader+" ") {
		for i, e := range events {
			if isLeader := strings.HasPrefix(e, initialLeader+":"); isLeader != (i == 2) {
				t.Errorf("defragmentation order %q: the leader %s goes last, after its followers", events, initialLeader)
			}
		}
	}
}

// fragment writes mib MiB under prefix, deletes it and compacts physically: the members' files
// keep their size while little of them is in use.
func fragment(t *testing.T, c *clientv3.Client, prefix string, mib int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	value := strings.Repeat("x", 64<<10)
	for i := 0; i < mib*16; i += 8 {
		var ops []clientv3.Op
		for j := i; j < i+8; j++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("%s%05d", prefix, j), value))
		}
		if _, err := c.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatalf("filling: %v", err)
		}
	}
	resp, err := c.Delete(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
}
