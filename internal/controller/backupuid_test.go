package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// TestRecreatedClusterSeesNoOldBackups (issue 23): a cluster deleted and recreated under the
// same name does not inherit its predecessor's backups, in status.backup nor in BackupReady, and
// a backup that records no cluster UID is bound to no cluster. Without a kubelet no backup Job
// runs: each backup fails at once (no quorum) after the controller recorded the cluster it
// resolved, and the test then writes the result a Job would have.
func TestRecreatedClusterSeesNoOldBackups(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	dest := stewardv1.BackupStorage{Volume: &stewardv1.VolumeStorage{PersistentVolumeClaimName: "backups"}}
	first := createCluster(t, ns)

	old := backupOf(t, ns, "db-old", dest, first.UID)
	succeed(t, old, "")
	eventually(t, "the first cluster names its backup", func() error { return lastSuccessful(ctx, first, "db-old") })

	if err := env.Client.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	eventually(t, "first cluster gone", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(first), &stewardv1.EtcdCluster{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w)", err)
		}
		return nil
	})
	// A backup that records no UID, as one taken before Steward recorded it would.
	legacy := backupOf(t, ns, "db-legacy", dest, "")
	succeed(t, legacy, "cdf818194e3a8c32")

	second := createCluster(t, ns)
	if second.UID == first.UID {
		t.Fatal("the recreated cluster has the same UID")
	}
	sched := &stewardv1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "yearly", Namespace: ns},
		Spec: stewardv1.EtcdBackupScheduleSpec{Schedule: "0 0 1 1 *", Template: stewardv1.EtcdBackupSpec{ClusterName: "db", Destination: dest}}}
	if err := env.Client.Create(ctx, sched); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the recreated cluster has BackupReady", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(second), second); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(second.Status.Conditions, "BackupReady"); c == nil {
			return fmt.Errorf("no BackupReady yet")
		}
		return nil
	})
	// Settled: the backups' changes reached the cluster long ago, and it stays so.
	for range 10 {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(second), second); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(second.Status.Conditions, "BackupReady")
		if second.Status.Backup != nil || c.Reason != "NoBackupYet" {
			t.Fatalf("the recreated cluster sees backups that are not its own: status.backup %+v, BackupReady %s %q",
				second.Status.Backup, c.Reason, c.Message)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(legacy), legacy); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(legacy.Status.Conditions, stewardv1.ConditionBound); c == nil || c.Status != metav1.ConditionFalse ||
		c.Reason != "Unbound" || legacy.Status.ClusterUID != "" {
		t.Errorf("the legacy backup: uid %q, Bound %+v; want Unbound", legacy.Status.ClusterUID, c)
	}

	// Its own backup counts.
	own := backupOf(t, ns, "db-new", dest, second.UID)
	succeed(t, own, "")
	eventually(t, "the recreated cluster names its own backup", func() error {
		if err := lastSuccessful(ctx, second, "db-new"); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(second.Status.Conditions, "BackupReady"); c == nil || c.Reason != "BackupSucceeded" {
			return fmt.Errorf("BackupReady %+v", c)
		}
		return nil
	})
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(old), old); err != nil || old.Status.ClusterUID != first.UID {
		t.Errorf("the old backup lost its cluster: uid %q (%v)", old.Status.ClusterUID, err)
	}
}

func createCluster(t *testing.T, ns string) *stewardv1.EtcdCluster {
	t.Helper()
	ec := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec: stewardv1.EtcdClusterSpec{MemberTemplate: stewardv1.MemberTemplate{Version: "3.6.16"}}}
	if err := env.Client.Create(context.Background(), ec); err != nil {
		t.Fatal(err)
	}
	eventually(t, "cluster reconciled", func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(ec), ec); err != nil {
			return err
		}
		if ec.Status.Observed == nil {
			return fmt.Errorf("not reconciled yet")
		}
		return nil
	})
	return ec
}

// backupOf creates a backup of db and waits until the controller failed it (no quorum), having
// recorded uid (or, with "", no UID: no cluster existed).
func backupOf(t *testing.T, ns, name string, dest stewardv1.BackupStorage, uid types.UID) *stewardv1.EtcdBackup {
	t.Helper()
	b := &stewardv1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: stewardv1.EtcdBackupSpec{ClusterName: "db", Destination: dest}}
	if err := env.Client.Create(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	eventually(t, name+" failed and bound", func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		if b.Status.Phase != stewardv1.BackupFailed || meta.FindStatusCondition(b.Status.Conditions, stewardv1.ConditionBound) == nil {
			return fmt.Errorf("phase %s, conditions %+v", b.Status.Phase, b.Status.Conditions)
		}
		if b.Status.ClusterUID != uid {
			return fmt.Errorf("recorded uid %q, want %q", b.Status.ClusterUID, uid)
		}
		return nil
	})
	return b
}

// succeed writes the result a backup Job would have.
func succeed(t *testing.T, b *stewardv1.EtcdBackup, clusterID string) {
	t.Helper()
	base := b.DeepCopy()
	now := metav1.NewTime(time.Now())
	b.Status.Phase, b.Status.CompletionTime, b.Status.Revision, b.Status.ClusterID = stewardv1.BackupSucceeded, &now, 42, clusterID
	b.Status.Key, b.Status.Message = "ns/db/"+b.Name+"/snapshot.db.zst", "snapshot at revision 42"
	if err := env.Client.Status().Patch(context.Background(), b, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

func lastSuccessful(ctx context.Context, ec *stewardv1.EtcdCluster, want string) error {
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
		return err
	}
	if b := ec.Status.Backup; b == nil || b.LastSuccessfulBackup == nil || b.LastSuccessfulBackup.Name != want {
		return fmt.Errorf("status.backup %+v, want %s", b, want)
	}
	return nil
}

// The cluster's status.backup.continuous follows its streaming schedule's status.continuous: what
// the continuous-backup metrics and alert read.
func TestClusterSummarizesItsContinuousBackup(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ec := createCluster(t, ns)
	s := &stewardv1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "pitr", Namespace: ns},
		Spec: stewardv1.EtcdBackupScheduleSpec{Schedule: "0 3 1 1 *", Continuous: &stewardv1.ContinuousBackupSpec{},
			Template: stewardv1.EtcdBackupSpec{ClusterName: "db", Destination: stewardv1.BackupStorage{S3: &stewardv1.S3Storage{Bucket: "b",
				CredentialsSecretRef: stewardv1.S3CredentialsRef{Name: "s3"}}}}}}
	if err := env.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	durable := metav1.NewTime(time.Unix(1800000000, 0))
	// A merge patch of status.continuous alone: the running manager writes the schedule's status
	// too, and an update of the whole status from a stale read would conflict (seen in CI).
	base := s.DeepCopy()
	s.Status.Continuous = &stewardv1.ContinuousBackupStatus{DurableRevision: 90, HeadRevision: 95, LagRevisions: 5, DurableTime: &durable, ReportedAt: &durable}
	if err := env.Client.Status().Patch(ctx, s, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "status.backup.continuous", func() error {
		var got stewardv1.EtcdCluster
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), &got); err != nil {
			return err
		}
		b := got.Status.Backup
		if b == nil || b.Continuous == nil || b.Continuous.Schedule != "pitr" || b.Continuous.DurableRevision != 90 ||
			b.Continuous.LagRevisions != 5 || b.Continuous.DurableTime == nil || !b.Continuous.DurableTime.Equal(&durable) {
			return fmt.Errorf("status.backup %+v", b)
		}
		return nil
	})
}
