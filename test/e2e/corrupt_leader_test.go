//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-steward/steward/internal/resources"
	"github.com/etcd-steward/steward/test/e2e/framework"
)

// TestCorruptLeaderReplaced (issue 23, finding 4): the leader's data goes bad while it runs. One
// value in the leader's live bbolt file is overwritten on the host (etcd maps the file shared, so
// the running leader serves and hashes the changed bytes at once; stopped, it would be caught by the
// startup check and never lead). etcd's periodic corruption check runs on the leader and compares
// each follower's hash with the leader's own, so it blames a healthy follower: the test raises that
// alarm, naming a follower, through etcd's maintenance API as the leader's check does (the operator
// pins the check's interval at resources.CorruptCheckTime, 5 minutes, and users may not change it).
// Steward must judge by the voters' HashKV, not by the alarm: move leadership to the majority,
// replace the former leader (new member ID, new PVC), keep both followers (same IDs, same PVC
// UIDs), disarm, and every acknowledged write, the corrupted value included, reads back as the
// majority holds it.
func TestCorruptLeaderReplaced(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "db", 3, "")
	cl := clientFor(t, ns, "db")
	data := putData(t, cl, "/corrupt-leader/", 20)
	// A long, unique value: its bytes occur in the leader's db file only where that key's value is.
	marker := fmt.Sprintf("%-64s", "steward-e2e-corrupt-leader-marker/"+ns)[:64]
	marker = strings.ReplaceAll(marker, " ", "#")
	const markerKey = "/corrupt-leader-marker"
	put, err := cl.Put(context.Background(), markerKey, marker)
	if err != nil {
		t.Fatal(err)
	}
	members := memberClients(t, ns, "db")
	waitApplied(t, ns, members, markerKey, marker, put.Header.Revision)
	lead, followers := etcdLeader(t, members, memberIDs(t, ns, "db"))
	idsBefore, pvcsBefore := memberIDs(t, ns, "db"), pvcUIDs(t, ns, "db")
	t.Logf("leader %s (%s), followers %v; PVCs %v", lead, idsBefore[lead], followers, pvcsBefore)

	n := corruptLive(t, ns, lead, []byte(marker))
	t.Logf("overwrote the marker value at %d place(s) in %s's live bbolt file", n, lead)
	// The corrupt leader still serves: writes after the corruption are acknowledged, so they must
	// survive too.
	after := putData(t, cl, "/corrupt-leader-after/", 5)

	// The premise, checked through etcd itself: the running leader serves the changed value and its
	// hash differs from the followers', which agree with each other.
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	got, err := members[lead].Get(sctx, markerKey, clientv3.WithSerializable())
	scancel()
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) == marker {
		t.Fatalf("the leader's own read of %s after the overwrite: %v %v (want a changed value)", markerKey, got, err)
	}
	t.Logf("%s now serves %s = %q", lead, markerKey, got.Kvs[0].Value)
	hashes := memberHashes(t, members)
	if hashes[lead] == hashes[followers[0]] || hashes[followers[0]] != hashes[followers[1]] {
		t.Fatalf("HashKV after corrupting %s: %v; want the leader alone to differ", lead, hashes)
	}
	t.Logf("HashKV (hash@revision/compacted): %v", hashes)
	if now, _ := etcdLeader(t, members, idsBefore); now != lead {
		t.Fatalf("leadership moved from %s to %s on its own before the alarm; the scenario needs the corrupt member leading", lead, now)
	}

	// What the leader's periodic check does: CORRUPT naming the first follower whose hash differs
	// from its own, proposed by the leader.
	named := followers[0]
	trail := trailLeaders(t, members, followers, idsBefore, lead)
	id, err := strconv.ParseUint(idsBefore[named], 16, 64)
	if err != nil {
		t.Fatalf("member ID %q: %v", idsBefore[named], err)
	}
	actx, acancel := context.WithTimeout(context.Background(), 30*time.Second)
	_, err = etcdserverpb.NewMaintenanceClient(members[lead].ActiveConnection()).Alarm(actx, &etcdserverpb.AlarmRequest{
		Action: etcdserverpb.AlarmRequest_ACTIVATE, MemberID: id, Alarm: etcdserverpb.AlarmType_CORRUPT})
	acancel()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	t.Logf("CORRUPT raised naming the healthy follower %s (%s)", named, idsBefore[named])

	waitMemberReplaced(t, ns, "db", lead, idsBefore[lead], 4*time.Minute)
	measure(t, "CORRUPT naming a healthy follower to the corrupt leader replaced", time.Since(start))
	waitSettled(t, ns, "db", 3, 3*time.Minute)
	measure(t, "CORRUPT naming a healthy follower to settled at 3 members", time.Since(start))

	idsAfter, pvcsAfter := memberIDs(t, ns, "db"), pvcUIDs(t, ns, "db")
	if idsAfter[lead] == idsBefore[lead] {
		t.Errorf("%s kept member ID %s: the corrupt former leader was not replaced", lead, idsBefore[lead])
	}
	if pvcsAfter[lead] == pvcsBefore[lead] {
		t.Errorf("%s kept PVC %s: its corrupt data was not deleted", lead, pvcsBefore[lead])
	}
	for _, m := range followers {
		if idsAfter[m] != idsBefore[m] {
			t.Errorf("follower %s's member ID %s became %s: a member with the majority's data was replaced", m, idsBefore[m], idsAfter[m])
		}
		if pvcsAfter[m] != pvcsBefore[m] {
			t.Errorf("follower %s's PVC %s became %s: a member with the majority's data lost it", m, pvcsBefore[m], pvcsAfter[m])
		}
	}
	for _, reason := range []string{"MoveLeader", "RemoveMember", "DisarmAlarm"} {
		t.Logf("%s events: %q", reason, eventsWith(t, ns, "db", reason))
	}
	// One removal, of the corrupt leader: said as the replacement, or (CI, once) as the removal whose
	// intent the replacement recorded first and a later reconcile carried out, the reason then in
	// the MoveLeader event before it.
	removals, moves := eventsWith(t, ns, "db", "RemoveMember"), eventsWith(t, ns, "db", "MoveLeader")
	why := slices.ContainsFunc(moves, func(m string) bool { return strings.Contains(m, "its hash differs") })
	if len(removals) != 1 || !strings.HasPrefix(removals[0], "replacing "+lead+": its hash differs") &&
		(removals[0] != "removing "+lead+" from etcd" || !why) {
		t.Errorf("RemoveMember events %q (MoveLeader %q); want one, replacing %s for its hash", removals, moves, lead)
	}
	trail.checkHandoff(eventsWith(t, ns, "db", "MoveLeader"))

	f.WaitFor(t, ns, "no alarm left", time.Minute, func(ctx context.Context) (bool, error) {
		resp, err := cl.AlarmList(ctx)
		if err != nil {
			return false, err
		}
		return len(resp.Alarms) == 0, fmt.Errorf("alarms %v", resp.Alarms)
	})
	checkData(t, cl, "/corrupt-leader/", data)
	checkData(t, cl, "/corrupt-leader-after/", after)
	// Every member, the fresh one included, holds the majority's value of the corrupted key, and
	// all hashes agree again.
	members = memberClients(t, ns, "db")
	waitApplied(t, ns, members, markerKey, marker, put.Header.Revision)
	if hashes := memberHashes(t, members); hashes[lead] != hashes[followers[0]] || hashes[lead] != hashes[followers[1]] {
		t.Errorf("HashKV after the replacement: %v; want all equal", hashes)
	}
	if _, err := cl.Put(context.Background(), "/corrupt-leader-after/write", "ok"); err != nil {
		t.Errorf("a write after the replacement: %v", err)
	}
}

// leaderTrail is what the members that stay said about leadership until the one that led left
// etcd's member list: the distinct consecutive leaders they named, by member name.
type leaderTrail struct {
	t       *testing.T
	lead    string
	mu      sync.Mutex
	leaders []string // before the removal was seen
	removed bool
	stop    chan struct{}
	done    chan struct{}
}

// trailLeaders asks the staying members every 100 ms whom they follow and whether lead is still a
// member, until lead is gone. Each tick asks for the leader before the member list, so a leader
// change seen on an earlier tick than the removal happened before it.
func trailLeaders(t *testing.T, members map[string]*clientv3.Client, stay []string, ids map[string]string, lead string) *leaderTrail {
	names := map[uint64]string{}
	for n, id := range ids {
		v, err := strconv.ParseUint(id, 16, 64)
		if err != nil {
			t.Fatalf("member ID %q: %v", id, err)
		}
		names[v] = n
	}
	leadID, _ := strconv.ParseUint(ids[lead], 16, 64)
	tr := &leaderTrail{t: t, lead: lead, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		for {
			select {
			case <-tr.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			for _, n := range stay {
				c := members[n]
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				s, err := c.Status(ctx, c.Endpoints()[0])
				cancel()
				if err != nil || s.Leader == 0 {
					continue
				}
				tr.mu.Lock()
				if l := len(tr.leaders); l == 0 || tr.leaders[l-1] != names[s.Leader] {
					tr.leaders = append(tr.leaders, names[s.Leader])
				}
				tr.mu.Unlock()
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			list, err := members[stay[0]].MemberList(ctx)
			cancel()
			if err == nil && !slices.ContainsFunc(list.Members, func(m *etcdserverpb.Member) bool { return m.ID == leadID }) {
				tr.mu.Lock()
				tr.removed = true
				tr.mu.Unlock()
				return
			}
		}
	}()
	t.Cleanup(tr.halt)
	return tr
}

func (tr *leaderTrail) halt() {
	select {
	case <-tr.stop:
	default:
		close(tr.stop)
	}
	<-tr.done
}

// checkHandoff asserts that leadership left the corrupt leader before it was removed
// (framework.HandedOff): moves are the operator's MoveLeader events.
func (tr *leaderTrail) checkHandoff(moves []string) {
	t := tr.t
	t.Helper()
	tr.halt()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if !framework.HandedOff(tr.lead, moves, tr.leaders, tr.removed) {
		t.Errorf("MoveLeader events %q, leaders before the removal %v (removal seen: %v); want leadership moved off %s before its removal",
			moves, tr.leaders, tr.removed, tr.lead)
	} else if len(moves) == 0 {
		t.Logf("no MoveLeader from %s: an election of etcd's own moved leadership before its removal (leaders %v)", tr.lead, tr.leaders)
	}
}

// memberClients connects to each member Pod on its own (by Pod IP), so that serializable reads,
// Status and HashKV ask exactly that member.
func memberClients(t *testing.T, ns, name string) map[string]*clientv3.Client {
	t.Helper()
	var tc = clientTLSFor(t, ns, name).Config("")
	if !tlsEnabled(t, ns, name) {
		tc = nil
	}
	out := map[string]*clientv3.Client{}
	for n, p := range memberPods(t, ns, name) {
		if p.Status.PodIP == "" {
			t.Fatalf("%s has no Pod IP", n)
		}
		out[n] = f.EtcdClient(t, tc, p)
	}
	return out
}

// waitApplied waits until every member has applied rev and serves key = value from its own store.
func waitApplied(t *testing.T, ns string, members map[string]*clientv3.Client, key, value string, rev int64) {
	t.Helper()
	f.WaitFor(t, ns, key+" applied on every member", time.Minute, func(ctx context.Context) (bool, error) {
		for n, c := range members {
			resp, err := c.Get(ctx, key, clientv3.WithSerializable())
			if err != nil {
				return false, fmt.Errorf("%s: %w", n, err)
			}
			if resp.Header.Revision < rev || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != value {
				return false, fmt.Errorf("%s at revision %d: %v", n, resp.Header.Revision, resp.Kvs)
			}
		}
		return true, nil
	})
}

// etcdLeader asks every member whom it follows; all must agree. It returns the leader's name and
// the followers' names, sorted.
func etcdLeader(t *testing.T, members map[string]*clientv3.Client, ids map[string]string) (string, []string) {
	t.Helper()
	var lead uint64
	for n, c := range members {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := c.Status(ctx, c.Endpoints()[0])
		cancel()
		if err != nil {
			t.Fatalf("%s's status: %v", n, err)
		}
		if lead != 0 && s.Leader != lead {
			t.Fatalf("members disagree on the leader: %x and %x", lead, s.Leader)
		}
		lead = s.Leader
	}
	var leader string
	var followers []string
	for n, id := range ids {
		if id == strconv.FormatUint(lead, 16) {
			leader = n
		} else {
			followers = append(followers, n)
		}
	}
	if leader == "" || len(followers) != len(ids)-1 {
		t.Fatalf("leader %x is not among the members %v", lead, ids)
	}
	slices.Sort(followers)
	return leader, followers
}

// memberHashes reads every member's HashKV at one revision every member has applied (no write
// may land in between, or the members hash different ranges: the lowest current revision).
func memberHashes(t *testing.T, members map[string]*clientv3.Client) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rev int64
	for n, c := range members {
		s, err := c.Status(ctx, c.Endpoints()[0])
		if err != nil {
			t.Fatalf("%s's status: %v", n, err)
		}
		if rev == 0 || s.Header.Revision < rev {
			rev = s.Header.Revision
		}
	}
	out := map[string]string{}
	for n, c := range members {
		h, err := c.HashKV(ctx, c.Endpoints()[0], rev)
		if err != nil {
			t.Fatalf("%s's HashKV at revision %d: %v", n, rev, err)
		}
		out[n] = fmt.Sprintf("%08x@%d/%d", h.Hash, rev, h.CompactRevision)
	}
	return out
}

// pvcUIDs maps each member to the UID of its PVC ("" when it has none).
func pvcUIDs(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range memberNames(name, 3) {
		var pvc corev1.PersistentVolumeClaim
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.PVCName(m)}, &pvc)
		cancel()
		if client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
		out[m] = string(pvc.UID)
	}
	return out
}

// corruptLive overwrites, in a running member's bbolt file on the host path of its PVC, the first
// bytes of every copy of value (same length, in place: the file is neither truncated nor renamed,
// so etcd's shared mapping of it sees the change). bbolt writes pages copy-on-write, so a value may
// also sit in freed pages; those are changed too, harmlessly. It waits for the value to reach the
// file (etcd commits its backend batch every 100 ms) and returns how many copies it changed.
func corruptLive(t *testing.T, ns, member string, value []byte) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var pvc corev1.PersistentVolumeClaim
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.PVCName(member)}, &pvc); err != nil {
		t.Fatal(err)
	}
	var pv corev1.PersistentVolume
	if err := f.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, &pv); err != nil {
		t.Fatal(err)
	}
	if pv.Spec.Local == nil {
		t.Fatalf("PV %s is not a local volume: cannot reach the member's files", pv.Name)
	}
	path := filepath.Join(pv.Spec.Local.Path, "data", "member", "snap", "db")
	bad := bytes.Clone(value)
	copy(bad, "CORRUPT!")
	var n int
	err := framework.Poll(ctx, 20*time.Second, func(context.Context) (bool, error) {
		file, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return false, err
		}
		defer func() { _ = file.Close() }()
		content, err := os.ReadFile(path)
		if err != nil {
			return false, err
		}
		for off := 0; ; {
			i := bytes.Index(content[off:], value)
			if i < 0 {
				break
			}
			if _, err := file.WriteAt(bad, int64(off+i)); err != nil {
				return false, err
			}
			n++
			off += i + len(value)
		}
		return n > 0, fmt.Errorf("%s holds no copy of the value yet", path)
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
