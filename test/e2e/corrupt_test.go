//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
)

// TestCorruptAlarmHashesAgree (issues 12 and 23): a CORRUPT alarm names one follower, but every
// member's data is the same. The alarm is raised through etcd's own maintenance API, as its leader-side
// check does; that check blames a follower even when the leader is the corrupt one, so Steward reads
// every voter's HashKV and replaces only a member a strict majority outvotes. Here all hashes agree:
// Steward replaces nobody and leaves the alarm, reporting CorruptionNeedsHuman with the hashes; once
// a human disarms, the cluster settles and writes work again.
func TestCorruptAlarmHashesAgree(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "db", 3, "")
	cl := clientFor(t, ns, "db")
	data := putData(t, cl, "/corrupt/", 20)
	victim := follower(t, ns, "db")
	before := memberIDs(t, ns, "db")
	id, err := strconv.ParseUint(before[victim], 16, 64)
	if err != nil {
		t.Fatalf("member ID %q: %v", before[victim], err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = etcdserverpb.NewMaintenanceClient(cl.ActiveConnection()).Alarm(ctx, &etcdserverpb.AlarmRequest{
		Action: etcdserverpb.AlarmRequest_ACTIVATE, MemberID: id, Alarm: etcdserverpb.AlarmType_CORRUPT})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	f.WaitFor(t, ns, "CORRUPT with agreeing hashes reported for a human", 2*time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, "db")
		if err != nil {
			return false, err
		}
		p, d := condition(ec, "Progressing"), condition(ec, "Degraded")
		ok := strings.Contains(p, "=False CorruptionNeedsHuman") && strings.Contains(d, "=True CorruptionNeedsHuman") &&
			strings.Contains(d, "all 3 voters agree")
		return ok, fmt.Errorf("%s; %s", p, d)
	})
	measure(t, "CORRUPT with agreeing hashes to CorruptionNeedsHuman", time.Since(start))
	if after := memberIDs(t, ns, "db"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("member IDs %v became %v: a member with the majority's data was replaced", before, after)
	}
	if removals := eventsWith(t, ns, "db", "RemoveMember"); len(removals) != 0 {
		t.Errorf("RemoveMember %q while every hash agrees", removals)
	}
	dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer dcancel()
	if _, err := cl.AlarmDisarm(dctx, &clientv3.AlarmMember{MemberID: id, Alarm: etcdserverpb.AlarmType_CORRUPT}); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, ns, "db", 3, 3*time.Minute)
	checkData(t, cl, "/corrupt/", data)
	if _, err := cl.Put(context.Background(), "/corrupt/after", "ok"); err != nil {
		t.Errorf("a write after the disarm: %v", err)
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

// TestCorruptDataReplaced: real divergence. A follower is stopped (the cluster paused so nothing
// recreates it), one value in its bbolt file is changed on the host, and the cluster resumes. etcd's
// startup corruption check (on for every member) finds the member's hash differing from its peers'
// and refuses to serve; the member crash-loops and is replaced from the others' data.
func TestCorruptDataReplaced(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "db", 3, "")
	cl := clientFor(t, ns, "db")
	data := putData(t, cl, "/diverge/", 20)
	victim := follower(t, ns, "db")
	before := memberIDs(t, ns, "db")[victim]
	update(t, ns, "db", func(ec *stewardv1.EtcdCluster) { ec.Spec.Paused = true })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := f.Client.Delete(ctx, memberPods(t, ns, "db")[victim], client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	f.WaitFor(t, ns, victim+"'s Pod gone", time.Minute, func(context.Context) (bool, error) {
		_, ok := memberPods(t, ns, "db")[victim]
		return !ok, nil
	})
	diverge(t, ns, victim)
	start := time.Now()
	update(t, ns, "db", func(ec *stewardv1.EtcdCluster) { ec.Spec.Paused = false })
	waitMemberReplaced(t, ns, "db", victim, before, 10*time.Minute)
	waitSettled(t, ns, "db", 3, 3*time.Minute)
	measure(t, "a member with divergent data (startup corruption check) replaced", time.Since(start))
	checkData(t, cl, "/diverge/", data)
}

// diverge changes one byte of the newest revision's value in a stopped member's bbolt file, on the
// host path of its PVC (the local provisioner's volumes are host directories).
func diverge(t *testing.T, ns, member string) {
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
	db, err := bolt.Open(filepath.Join(pv.Spec.Local.Path, "data", "member", "snap", "db"), 0o600, &bolt.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return fmt.Errorf("no key bucket")
		}
		k, v := b.Cursor().Last()
		changed := append([]byte(nil), v...)
		changed[len(changed)-1] ^= 0x01
		return b.Put(append([]byte(nil), k...), changed)
	})
	if err != nil {
		t.Fatal(err)
	}
}
