//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/backupjob"
	"github.com/etcd-steward/steward/internal/segment"
	"github.com/etcd-steward/steward/test/e2e/framework"
)

// pitrWorkload mixes puts, overwrites, deletes, multi-key transactions, leased keys and lease
// revocations, so every kind of change a replay must rebuild is in the chain.
type pitrWorkload struct {
	cl     *clientv3.Client
	rng    *rand.Rand
	leases []clientv3.LeaseID
	writes int
	last   int64
}

func (w *pitrWorkload) step(ctx context.Context, t *testing.T, i int) {
	key := func() string { return fmt.Sprintf("/pitr/k%03d", w.rng.IntN(200)) }
	var rev int64
	var err error
	switch op := w.rng.IntN(20); {
	case op < 8:
		var r *clientv3.PutResponse
		if r, err = w.cl.Put(ctx, key(), fmt.Sprintf("v%d", i)); err == nil {
			rev = r.Header.Revision
		}
	case op < 10:
		var r *clientv3.DeleteResponse
		if r, err = w.cl.Delete(ctx, key()); err == nil {
			rev = r.Header.Revision
		}
	case op < 14:
		var r *clientv3.TxnResponse
		put, del := key(), key()
		for del == put { // etcd refuses a transaction that names a key twice
			del = key()
		}
		if r, err = w.cl.Txn(ctx).Then(clientv3.OpPut(put, fmt.Sprintf("t%d", i)), clientv3.OpDelete(del),
			clientv3.OpPut(fmt.Sprintf("/pitr/txn/%d", i), strings.Repeat("x", w.rng.IntN(200)))).Commit(); err == nil {
			rev = r.Header.Revision
		}
	case op < 17:
		var l *clientv3.LeaseGrantResponse
		if l, err = w.cl.Grant(ctx, int64(600+w.rng.IntN(600))); err == nil {
			w.leases = append(w.leases, l.ID)
			var r *clientv3.TxnResponse
			if r, err = w.cl.Txn(ctx).Then(clientv3.OpPut(fmt.Sprintf("/pitr/lease/%d/a", i), "a", clientv3.WithLease(l.ID)),
				clientv3.OpPut(fmt.Sprintf("/pitr/lease/%d/b", i), "b", clientv3.WithLease(l.ID))).Commit(); err == nil {
				rev = r.Header.Revision
			}
		}
	default:
		if len(w.leases) > 0 {
			j := w.rng.IntN(len(w.leases))
			var r *clientv3.LeaseRevokeResponse
			if r, err = w.cl.Revoke(ctx, w.leases[j]); err == nil {
				rev = r.Header.Revision
			}
			w.leases = append(w.leases[:j], w.leases[j+1:]...)
		}
	}
	if err == nil && rev == 0 {
		return // nothing to revoke
	}
	if err != nil {
		// A request cut by a killed streamer or operator never happens here (neither serves
		// clients); a member's hiccup is retried as the next step.
		t.Logf("workload step %d: %v", i, err)
		return
	}
	w.writes++
	w.last = max(w.last, rev)
}

// TestPointInTimeRestore: a schedule's continuous backup under a mixed workload, with the streamer
// Pod and the operator killed mid-way; then two clusters restored from the chain, one to a chosen
// revision and one to a time inside a pause in the writes. Each restored keyspace equals the
// source's at that revision, read from the source with WithRev: every key, value, create and mod
// revision, version, and the leases the keys hold.
//
// etcd auth is on in the source from its creation (issue 29): the base backup, the streamer's
// watch and the chain's drill run as Steward's backup identity (root), and the restored clusters
// come back with the source's users and declare spec.auth for their own shared client.
func TestPointInTimeRestore(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "src", 3, "", authOn)
	waitAuthOf(t, ns, "src", "auth on", 2*time.Minute, func(a *stewardv1.AuthStatus) bool { return a.Phase == "On" })
	dest, s3 := s3Storage(t, ns)
	// Sealed under a key that is rotated mid-way: the chain spans both keys.
	oldKey, newKey := ageIdentity(t), ageIdentity(t)
	keySecret(t, ns, "pitr-key", oldKey)
	dest.Encryption = &stewardv1.BackupEncryption{KeySecretRef: stewardv1.EncryptionKeyRef{Name: "pitr-key"}}
	cl := clientFor(t, ns, "src")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	w := &pitrWorkload{cl: cl, rng: rand.New(rand.NewPCG(27, 4))}
	for i := range 100 {
		w.step(ctx, t, i)
	}

	// The base, then the schedule's streamer continues from it.
	createObj(t, newBackup(ns, "base", "src", dest))
	base := backupDone(t, ns, "base", 3*time.Minute)
	if base.Status.Phase != stewardv1.BackupSucceeded {
		t.Fatalf("base backup: %s", base.Status.Message)
	}
	sched := &stewardv1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pitr"},
		Spec: stewardv1.EtcdBackupScheduleSpec{Schedule: "0 3 1 1 *", Verify: true, Template: stewardv1.EtcdBackupSpec{ClusterName: "src", Destination: dest},
			Continuous: &stewardv1.ContinuousBackupSpec{SegmentSeconds: 2}}}
	createObj(t, sched)
	streamStarted := time.Now()

	var mu sync.Mutex
	i := 100
	run := func(d time.Duration) {
		end := time.Now().Add(d)
		for time.Now().Before(end) && ctx.Err() == nil {
			mu.Lock()
			w.step(ctx, t, i)
			i++
			mu.Unlock()
			time.Sleep(15 * time.Millisecond)
		}
	}
	run(15 * time.Second)
	keySecret(t, ns, "pitr-key", newKey, oldKey) // the operator rolls the streamer onto the new key
	waitKeyID(t, ns, "pitr", newKey.Recipient().String())
	run(10 * time.Second)
	killStreamer(t, ns, "pitr")
	run(10 * time.Second)
	killOperator(t)
	run(10 * time.Second)

	// Every member rolled (the streamer's watch goes through the client Service, so the member it
	// watches restarts under it) while the object store is out of the streamer's reach for a
	// minute: the chain still holds every revision, one range, no hole.
	update(t, ns, "src", func(ec *stewardv1.EtcdCluster) {
		ec.Spec.Options.ExtraArgs = map[string]string{"log-outputs": "stderr"}
	})
	storeCut := cutStreamerFromStore(t, ns, "pitr", s3)
	run(60 * time.Second)
	storeCut.heal()
	waitRolled(t, ns, "src", 3)
	run(5 * time.Second)

	// A pause in the writes: the time restored is inside it, so exactly one revision answers it.
	paused := w.last
	time.Sleep(1500 * time.Millisecond)
	at := time.Now().UTC()
	time.Sleep(1500 * time.Millisecond)
	run(10 * time.Second)
	end, lastWrite := w.last, time.Now()
	durable := waitDurable(t, ns, "pitr", end, 2*time.Minute)
	if durable.Hole != "" || len(durable.Restorable) != 1 || durable.Restorable[0].FromRevision != base.Status.Revision {
		t.Errorf("after the faults: restorable %+v, hole %q; want one range from the base's revision %d", durable.Restorable, durable.Hole, base.Status.Revision)
	}
	t.Logf("MEASURE continuous backup: the last write durable in status %.1fs after it (segments of 2 s, status read every 10 s); streaming for %.0fs",
		time.Since(lastWrite).Seconds(), time.Since(streamStarted).Seconds())

	toRev := base.Status.Revision + 1 + w.rng.Int64N(paused-base.Status.Revision) // after the base, at or before the pause
	srcAtRev := keyspaceAt(t, cl, toRev)
	srcAtPause := keyspaceAt(t, cl, paused)
	segBytes, segs := segmentBytes(t, s3, ns+"/src/"+segment.Dir+"/")
	t.Logf("MEASURE continuous backup: %d write requests to revision %d, durable %d; %d segments, %d bytes (%.0f bytes a request)",
		w.writes, end, durable.DurableRevision, segs, segBytes, float64(segBytes)/float64(w.writes))

	checkSealed(t, s3, ns+"/src/", "/pitr/")
	streamerFigures(t, ns, "pitr", float64(w.writes)/time.Since(streamStarted).Seconds())

	restoreTo := func(name string, p *stewardv1.PointInTimeSpec) *stewardv1.EtcdCluster {
		took := restoredCluster(t, ns, name, 1, &stewardv1.RestoreSpec{PointInTime: p}, authOn)
		measure(t, "point-in-time restore of a 1-member cluster to settled ("+name+")", took)
		waitAuthOf(t, ns, name, name+"'s auth on", 2*time.Minute, func(a *stewardv1.AuthStatus) bool { return a.Phase == "On" })
		ec, err := get(context.Background(), ns, name)
		if err != nil {
			t.Fatal(err)
		}
		return ec
	}
	byRev := restoreTo("to-rev", &stewardv1.PointInTimeSpec{ScheduleName: "pitr", Revision: ptr.To(toRev)})
	if byRev.Status.Restore == nil || byRev.Status.Restore.Revision != toRev {
		t.Errorf("status.restore %+v, want revision %d", byRev.Status.Restore, toRev)
	}
	compareKeyspace(t, "revision", srcAtRev, keyspaceNow(t, clientFor(t, ns, "to-rev")))
	replayFigures(t, ns, "to-rev")

	byTime := restoreTo("to-time", &stewardv1.PointInTimeSpec{ScheduleName: "pitr", Time: &metav1.Time{Time: at}})
	if byTime.Status.Restore == nil || byTime.Status.Restore.Revision != paused {
		t.Errorf("time %s inside the pause after revision %d restored %+v", at.Format(time.RFC3339Nano), paused, byTime.Status.Restore)
	}
	compareKeyspace(t, "time", srcAtPause, keyspaceNow(t, clientFor(t, ns, "to-time")))

	// Without the key: a key Secret that does not exist holds the restore (nothing created), one
	// without the key that sealed the base fails the seed's fetch saying which key it needs.
	otherDest := *dest.DeepCopy()
	otherDest.Encryption.KeySecretRef.Name = "other-key"
	baseSource := &stewardv1.RestoreSpec{Source: &stewardv1.RestoreSource{BackupStorage: otherDest, Key: base.Status.Key}}
	create(t, newCluster(ns, "no-key", 1, "", func(ec *stewardv1.EtcdCluster) { ec.Spec.Bootstrap = &stewardv1.BootstrapSpec{Restore: baseSource} }))
	waitRestoredCondition(t, ns, "no-key", "RestoreRefused", `"other-key" does not exist`)
	noPods(t, ns, "no-key")
	keySecret(t, ns, "other-key", ageIdentity(t))
	waitRestoredCondition(t, ns, "no-key", "RestoreFailed", oldKey.Recipient().String())

	// Outside the restorable range: held with the ranges, nothing created.
	bad := newCluster(ns, "too-early", 1, "", func(ec *stewardv1.EtcdCluster) {
		ec.Spec.Bootstrap = &stewardv1.BootstrapSpec{Restore: &stewardv1.RestoreSpec{PointInTime: &stewardv1.PointInTimeSpec{
			ScheduleName: "pitr", Revision: ptr.To[int64](2)}}}
	})
	create(t, bad)
	waitRestoredCondition(t, ns, "too-early", "RestoreRefused", "not restorable")
	noPods(t, ns, "too-early")
	beforeBase := &metav1.Time{Time: base.Status.CompletionTime.Add(-time.Hour)}
	create(t, newCluster(ns, "too-early-time", 1, "", func(ec *stewardv1.EtcdCluster) {
		ec.Spec.Bootstrap = &stewardv1.BootstrapSpec{Restore: &stewardv1.RestoreSpec{PointInTime: &stewardv1.PointInTimeSpec{
			ScheduleName: "pitr", Time: beforeBase}}}
	}))
	waitRestoredCondition(t, ns, "too-early-time", "RestoreRefused", "is not restorable")
	noPods(t, ns, "too-early-time")

	// The chain's drill (spec.verify): a random revision restored in a Job and compared whole
	// with the live cluster at that revision.
	drill := waitDrill(t, ns, "pitr", 4*time.Minute)
	t.Logf("MEASURE chain drill: revision %d in %ds: %s", drill.Revision, drill.DurationSeconds, drill.Message)

	// A segment cut short in the store: the restore that needs it fails naming it, never a
	// shorter history.
	objs, err := s3.List(context.Background(), ns+"/src/"+segment.Dir+"/")
	if err != nil || len(objs) == 0 {
		t.Fatalf("listing segments: %d, %v", len(objs), err)
	}
	last := objs[len(objs)-1].Key
	b, err := s3.Get(context.Background(), last)
	if err != nil {
		t.Fatal(err)
	}
	if err := s3.Put(context.Background(), last, b[:len(b)/2]); err != nil {
		t.Fatal(err)
	}
	lastRev := w.last
	create(t, newCluster(ns, "truncated", 1, "", func(ec *stewardv1.EtcdCluster) {
		ec.Spec.Bootstrap = &stewardv1.BootstrapSpec{Restore: &stewardv1.RestoreSpec{PointInTime: &stewardv1.PointInTimeSpec{
			ScheduleName: "pitr", Revision: ptr.To(lastRev)}}}
	}))
	waitRestoredCondition(t, ns, "truncated", "RestoreFailed", path.Base(last))
}

func waitRestoredCondition(t *testing.T, ns, name, reason, says string) {
	t.Helper()
	f.WaitFor(t, ns, name+": Restored "+reason, 2*time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, name)
		if err != nil {
			return false, err
		}
		c := condition(ec, "Restored")
		return strings.Contains(c, reason) && strings.Contains(c, says), fmt.Errorf("Restored: %s", c)
	})
}

func noPods(t *testing.T, ns, cluster string) {
	t.Helper()
	var pods corev1.PodList
	if err := f.Client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{stewardv1.LabelCluster: cluster}); err != nil || len(pods.Items) != 0 {
		t.Errorf("a held restore created %d Pods (%v)", len(pods.Items), err)
	}
}

// killStreamer deletes the schedule's streamer Pod at once.
func killStreamer(t *testing.T, ns, schedule string) {
	t.Helper()
	var pods corev1.PodList
	if err := f.Client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{backupjob.LabelStream: schedule}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatal("no streamer Pod to kill")
	}
	for i := range pods.Items {
		if err := f.Client.Delete(context.Background(), &pods.Items[i], client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
}

func waitDurable(t *testing.T, ns, schedule string, rev int64, timeout time.Duration) stewardv1.ContinuousBackupStatus {
	t.Helper()
	var c stewardv1.ContinuousBackupStatus
	f.WaitFor(t, ns, fmt.Sprintf("revision %d durable", rev), timeout, func(ctx context.Context) (bool, error) {
		var s stewardv1.EtcdBackupSchedule
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: schedule}, &s); err != nil {
			return false, err
		}
		if s.Status.Continuous == nil {
			return false, fmt.Errorf("no status.continuous")
		}
		c = *s.Status.Continuous
		return c.DurableRevision >= rev, fmt.Errorf("durable %d, head %d, ranges %+v, hole %q", c.DurableRevision, c.HeadRevision, c.Restorable, c.Hole)
	})
	return c
}

// kv is what a restore must reproduce of one key.
type kv struct {
	value                   string
	create, mod, ver, lease int64
}

func keyspaceAt(t *testing.T, cl *clientv3.Client, rev int64) map[string]kv {
	t.Helper()
	return keyspace(t, cl, clientv3.WithRev(rev))
}

func keyspaceNow(t *testing.T, cl *clientv3.Client) map[string]kv { return keyspace(t, cl) }

func keyspace(t *testing.T, cl *clientv3.Client, opts ...clientv3.OpOption) map[string]kv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cl.Get(ctx, "/pitr/", append([]clientv3.OpOption{clientv3.WithPrefix()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]kv{}
	for _, k := range resp.Kvs {
		out[string(k.Key)] = kv{string(k.Value), k.CreateRevision, k.ModRevision, k.Version, k.Lease}
	}
	return out
}

func compareKeyspace(t *testing.T, what string, want, got map[string]kv) {
	t.Helper()
	bad := 0
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			if bad++; bad <= 5 {
				t.Errorf("restored to a %s: %s is %+v (present %t), the source had %+v", what, k, g, ok, w)
			}
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			if bad++; bad <= 5 {
				t.Errorf("restored to a %s: %s exists, the source did not have it", what, k)
			}
		}
	}
	if bad > 0 {
		t.Errorf("restored to a %s: %d of %d keys differ", what, bad, len(want))
	} else {
		t.Logf("restored to a %s: %d keys equal the source's, revisions and leases included", what, len(want))
	}
}

// segmentBytes sums the stored segments under prefix.
func segmentBytes(t *testing.T, s3 *framework.S3, prefix string) (int64, int) {
	t.Helper()
	objs, err := s3.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, o := range objs {
		n += o.Size
	}
	return n, len(objs)
}

// replayFigures logs the seed's fetch result: base, revisions replayed and how fast.
func replayFigures(t *testing.T, ns, name string) {
	t.Helper()
	var pods corev1.PodList
	if err := f.Client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{stewardv1.LabelCluster: name}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, s := range p.Status.InitContainerStatuses {
			if s.Name != "restore-fetch" || s.State.Terminated == nil {
				continue
			}
			var res struct {
				Base          string  `json:"base"`
				Replayed      int64   `json:"replayed"`
				Events        int64   `json:"events"`
				ReplaySeconds float64 `json:"replaySeconds"`
			}
			msg := strings.TrimSpace(s.State.Terminated.Message)
			if json.NewDecoder(bytes.NewReader([]byte(msg))).Decode(&res) == nil && res.ReplaySeconds > 0 {
				t.Logf("MEASURE replay: %d revisions (%d events) onto base %s in %.2fs: %.0f revisions/s",
					res.Replayed, res.Events, res.Base, res.ReplaySeconds, float64(res.Replayed)/res.ReplaySeconds)
			}
		}
	}
}

// authOn declares etcd authentication on, Steward's own users only.
func authOn(ec *stewardv1.EtcdCluster) { ec.Spec.Auth = &stewardv1.AuthSpec{Enabled: true} }
