//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
	"github.com/etcd-steward/steward/test/e2e/framework"
)

// Issue 11: backups stream from a follower to the environment's S3 server (versitygw, started
// with the local cluster) and restore into new clusters. TLS is on throughout (the default).

const s3Secret = "s3-credentials"

// s3Storage is the environment's bucket, with the test's Secret.
func s3Storage(t *testing.T, ns string) (stewardv1.BackupStorage, *framework.S3) {
	t.Helper()
	s3 := framework.RequireS3(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.CreateS3Secret(ctx, ns, s3Secret, s3.S3Config); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	return stewardv1.BackupStorage{S3: &stewardv1.S3Storage{Bucket: s3.Bucket, Endpoint: s3.Endpoint, Region: s3.Region,
		ForcePathStyle: true, CredentialsSecretRef: stewardv1.S3CredentialsRef{Name: s3Secret}}}, s3
}

func newBackup(ns, name, cluster string, dest stewardv1.BackupStorage, mutate ...func(*stewardv1.EtcdBackup)) *stewardv1.EtcdBackup {
	b := &stewardv1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: stewardv1.EtcdBackupSpec{ClusterName: cluster, Destination: dest}}
	for _, m := range mutate {
		m(b)
	}
	return b
}

// backupDone waits for a backup to reach a final phase and returns it.
func backupDone(t *testing.T, ns, name string, timeout time.Duration) *stewardv1.EtcdBackup {
	t.Helper()
	var b stewardv1.EtcdBackup
	f.WaitFor(t, ns, "backup "+name+" to finish", timeout, func(ctx context.Context) (bool, error) {
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &b); err != nil {
			return false, err
		}
		done := b.Status.Phase == stewardv1.BackupSucceeded || b.Status.Phase == stewardv1.BackupFailed
		return done, fmt.Errorf("phase %q: %s", b.Status.Phase, b.Status.Message)
	})
	return &b
}

func createObj(t *testing.T, o client.Object) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.Client.Create(ctx, o); err != nil {
		t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
	}
}

// putMany writes n small keys in transactions of 100 (few fsyncs: the suite's other clusters share
// the disk) and returns them.
func putMany(t *testing.T, c *clientv3.Client, prefix string, n int) map[string]string {
	t.Helper()
	want := map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i := 0; i < n; i += 100 {
		var ops []clientv3.Op
		for j := i; j < min(i+100, n); j++ {
			k, v := fmt.Sprintf("%s%05d", prefix, j), fmt.Sprintf("value-%d", j)
			ops = append(ops, clientv3.OpPut(k, v))
			want[k] = v
		}
		if _, err := c.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatalf("writing keys %d..%d: %v", i, i+len(ops)-1, err)
		}
	}
	return want
}

// restoredCluster creates a cluster seeded from restore and waits until it settles.
func restoredCluster(t *testing.T, ns, name string, replicas int32, restore *stewardv1.RestoreSpec,
	mutate ...func(*stewardv1.EtcdCluster)) time.Duration {
	t.Helper()
	start := time.Now()
	create(t, newCluster(ns, name, replicas, "", append(mutate, func(ec *stewardv1.EtcdCluster) {
		ec.Spec.Bootstrap = &stewardv1.BootstrapSpec{Restore: restore}
	})...))
	waitSettled(t, ns, name, replicas, 6*time.Minute)
	return time.Since(start)
}

// checkRestored proves the restore kept exactly the snapshot: every write acknowledged at or
// before its revision is there with its value, none after it, and the revision moved on by the
// bump so a watch from an old revision is refused as compacted.
func checkRestored(t *testing.T, ns, name string, b *stewardv1.EtcdBackup, h framework.History, keys map[string]string, srcID string) {
	t.Helper()
	ec, err := get(context.Background(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(ec.Status.Conditions, "Restored"); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Restored condition: %s", condition(ec, "Restored"))
	}
	if ec.Status.ClusterID == "" || ec.Status.ClusterID == srcID {
		t.Errorf("restored cluster ID %q, want a new one (source %s)", ec.Status.ClusterID, srcID)
	}
	cl := clientFor(t, ns, name)
	if len(keys) > 0 {
		checkData(t, cl, "/keys/", keys)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if len(h) > 0 {
		checkTraffic(ctx, t, cl, b, h)
	}
	resp, err := cl.Get(ctx, "/keys/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if min := b.Status.Revision + 1_000_000_000; resp.Header.Revision < min {
		t.Errorf("revision %d after the restore, want ≥ %d (snapshot + bump)", resp.Header.Revision, min)
	}
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	wr := <-cl.Watch(wctx, "/traffic/", clientv3.WithPrefix(), clientv3.WithRev(b.Status.Revision))
	if !errors.Is(wr.Err(), rpctypes.ErrCompacted) {
		t.Errorf("watch from the snapshot's revision %d: err %v, want it refused as compacted", b.Status.Revision, wr.Err())
	}
}

// TestBackupRestore writes 10,000 keys under traffic, backs up on demand while the operator is
// killed mid-stream, deletes the cluster and restores a new one from the backup.
func TestBackupRestore(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "src", 3, "")
	dest, s3 := s3Storage(t, ns)
	cl := clientFor(t, ns, "src")
	keys := putMany(t, cl, "/keys/", 10_000)
	tr := framework.StartTraffic(cl, framework.TrafficConfig{Prefix: "/traffic/", Workers: 4})
	srcEC, _ := get(context.Background(), ns, "src")
	podsBefore := uids(t, ns, "src")
	leaderBefore := leader(t, ns, "src")

	start := time.Now()
	createObj(t, newBackup(ns, "now", "src", dest))
	f.WaitFor(t, ns, "backup running", time.Minute, func(ctx context.Context) (bool, error) {
		var b stewardv1.EtcdBackup
		err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "now"}, &b)
		return err == nil && b.Status.Phase != "" && b.Status.Phase != stewardv1.BackupPending, fmt.Errorf("phase %q", b.Status.Phase)
	})
	killOperator(t) // the Job streams on; the restarted operator picks up its result
	b := backupDone(t, ns, "now", 5*time.Minute)
	measure(t, "on-demand backup of 10,000 keys under traffic (operator killed mid-way)", time.Since(start))
	time.Sleep(2 * time.Second) // writes after the snapshot, which the restore must not have
	h := tr.Stop()
	// Taking a snapshot disrupts no member: no Pod was deleted or recreated. (Pod UIDs, not the
	// availability monitor: on CI's loaded 2 cores a starved member can miss a probe by itself.)
	assertPodsUntouched(t, ns, "src", podsBefore, "a backup disrupts no member")
	if b.Status.Phase != stewardv1.BackupSucceeded {
		t.Fatalf("backup %s: %s", b.Status.Phase, b.Status.Message)
	}
	// Streamed from a follower: judged only when leadership held still through the backup.
	if b.Status.Member == "" || b.Status.Member == leaderBefore && leader(t, ns, "src") == leaderBefore {
		t.Errorf("backup streamed from %q; want a follower (leader %s)", b.Status.Member, leaderBefore)
	}
	if b.Status.Revision == 0 || b.Status.ClusterID != srcEC.Status.ClusterID || b.Status.SHA256 == "" || b.Status.Size == 0 ||
		!strings.HasPrefix(b.Status.Location, "s3://"+s3.Bucket+"/") {
		t.Errorf("backup status incomplete: %+v", b.Status)
	}
	data, err := s3.Get(context.Background(), b.Status.Key)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != b.Status.SHA256 || int64(len(data)) != b.Status.Size {
		t.Fatalf("object %s: %d bytes sha256 %x; status says %d bytes sha256 %s", b.Status.Key, len(data), sum, b.Status.Size, b.Status.SHA256)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := f.Client.Delete(ctx, srcEC); err != nil {
		t.Fatal(err)
	}
	took := restoredCluster(t, ns, "dst", 3, &stewardv1.RestoreSpec{BackupName: "now"})
	measure(t, "restore a 3-member cluster from the backup to settled", took)
	checkRestored(t, ns, "dst", b, h, keys, srcEC.Status.ClusterID)
}

// TestBackupDisasterDrill: back up, keep writing, lose 2 of 3 members with their data (quorum
// lost), see a backup of the broken cluster fail fast, and restore a new cluster from the backup.
func TestBackupDisasterDrill(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "prod", 3, "")
	dest, _ := s3Storage(t, ns)
	cl := clientFor(t, ns, "prod")
	tr := framework.StartTraffic(cl, framework.TrafficConfig{Prefix: "/traffic/", Workers: 4})
	time.Sleep(3 * time.Second)
	createObj(t, newBackup(ns, "nightly", "prod", dest))
	b := backupDone(t, ns, "nightly", 5*time.Minute)
	if b.Status.Phase != stewardv1.BackupSucceeded {
		t.Fatalf("backup %s: %s", b.Status.Phase, b.Status.Message)
	}
	time.Sleep(3 * time.Second)
	srcEC, _ := get(context.Background(), ns, "prod")

	// The disaster: two members and their volumes gone at once.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	update(t, ns, "prod", func(ec *stewardv1.EtcdCluster) { ec.Spec.Paused = true }) // a human stops the operator touching it
	for _, member := range []string{"prod-1", "prod-2"} {
		for _, o := range []client.Object{
			&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: resources.PVCName(member)}},
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: member}},
		} {
			if err := f.Client.Delete(ctx, o, client.GracePeriodSeconds(0)); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.WaitFor(t, ns, "quorum lost", 2*time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, "prod")
		if err != nil {
			return false, err
		}
		return !meta.IsStatusConditionTrue(ec.Status.Conditions, "Available"), errors.New(condition(ec, "Available"))
	})
	h := tr.Stop()

	start := time.Now()
	createObj(t, newBackup(ns, "too-late", "prod", dest))
	late := backupDone(t, ns, "too-late", time.Minute)
	measure(t, "a backup of a cluster without quorum fails", time.Since(start))
	if late.Status.Phase != stewardv1.BackupFailed || !strings.Contains(late.Status.Message, "quorum") {
		t.Errorf("backup without quorum: %s %q, want Failed naming the quorum", late.Status.Phase, late.Status.Message)
	}

	took := restoredCluster(t, ns, "prod-restored", 3, &stewardv1.RestoreSpec{BackupName: "nightly"})
	measure(t, "disaster drill: restore from the backup to settled", took)
	checkRestored(t, ns, "prod-restored", b, h, nil, srcEC.Status.ClusterID)
}

// TestBackupVolumeAndSource backs up to a PersistentVolumeClaim (no compression) and restores a
// new cluster from the object directly (spec.bootstrap.restore.source, the manifest next to it
// supplying the hash), the path for a snapshot whose EtcdBackup is gone.
func TestBackupVolumeAndSource(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "vol", 1, "")
	keys := putData(t, clientFor(t, ns, "vol"), "/keys/", 100)
	size := resource.MustParse("1Gi")
	createObj(t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backups"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}}}})
	dest := stewardv1.BackupStorage{Volume: &stewardv1.VolumeStorage{PersistentVolumeClaimName: "backups", Path: "etcd"}}
	createObj(t, newBackup(ns, "to-volume", "vol", dest, func(b *stewardv1.EtcdBackup) { b.Spec.Compression = stewardv1.CompressionNone }))
	b := backupDone(t, ns, "to-volume", 3*time.Minute)
	if b.Status.Phase != stewardv1.BackupSucceeded {
		t.Fatalf("backup %s: %s", b.Status.Phase, b.Status.Message)
	}
	if want := "etcd/" + ns + "/vol/to-volume/snapshot.db"; b.Status.Key != want {
		t.Errorf("key %q, want %q", b.Status.Key, want)
	}
	srcEC, _ := get(context.Background(), ns, "vol")
	took := restoredCluster(t, ns, "from-source", 1, &stewardv1.RestoreSpec{
		Source: &stewardv1.RestoreSource{BackupStorage: dest, Key: b.Status.Key}})
	measure(t, "restore of a 1-member cluster from a volume source to settled", took)
	checkRestored(t, ns, "from-source", b, nil, keys, srcEC.Status.ClusterID)
}

// checkTraffic: every traffic write acknowledged at or before the snapshot's revision is there, none after it.
func checkTraffic(ctx context.Context, t *testing.T, cl *clientv3.Client, b *stewardv1.EtcdBackup, h framework.History) {
	t.Helper()
	got, err := framework.ReadPrefix(ctx, cl, "/traffic/")
	if err != nil {
		t.Fatal(err)
	}
	before := 0
	for _, op := range h.Acknowledged() {
		if op.Revision <= b.Status.Revision {
			before++
			if got[op.Key] != op.Value {
				t.Errorf("write %s at revision %d (≤ snapshot %d) is %q after the restore, want %q", op.Key, op.Revision, b.Status.Revision, got[op.Key], op.Value)
			}
		} else if v, ok := got[op.Key]; ok {
			t.Errorf("write %s at revision %d (> snapshot %d) is present (%q) after the restore", op.Key, op.Revision, b.Status.Revision, v)
		}
	}
	t.Logf("restore: %d acknowledged traffic writes at or before revision %d present, %d later writes absent", before, b.Status.Revision, len(h.Acknowledged())-before)
	if before == 0 {
		t.Errorf("no acknowledged write predates the snapshot: the check proves nothing")
	}
}
