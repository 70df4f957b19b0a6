package controller_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/controller"
	"github.com/etcd-steward/steward/internal/plan"
)

// The intent of a downgrade is recorded with a backup into the cluster's schedule destination,
// and the backup is read back for the plan; without a schedule none is taken. The cluster object
// exists only in the test (unmanagedCluster), so the running manager never acts on it.
func TestDowngradeIntentTakesABackupFirst(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	r := &controller.EtcdClusterReconciler{Client: env.Client, APIReader: env.Client}
	enabling := plan.Action{Kind: plan.Downgrade, DowngradeStage: stewardv1.DowngradeEnabling, DowngradeFrom: "3.7.3",
		Message: "recording the downgrade"}

	ec := unmanagedCluster(ns)
	if err := r.GatherAndApply(ctx, ec, enabling); err != nil {
		t.Fatal(err)
	}
	d := ec.Status.Downgrade
	if d == nil || d.Stage != stewardv1.DowngradeEnabling || d.From != "3.7.3" || d.Target != "3.6.16" || d.Backup != "" {
		t.Fatalf("without a schedule: status.downgrade %+v, want Enabling 3.7.3 -> 3.6.16 and no backup", d)
	}

	dest := stewardv1.BackupStorage{Volume: &stewardv1.VolumeStorage{PersistentVolumeClaimName: "backups"}}
	for _, name := range []string{"zz-other", "nightly"} {
		s := &stewardv1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: stewardv1.EtcdBackupScheduleSpec{Schedule: "0 3 * * *", Verify: name == "nightly",
				Template: stewardv1.EtcdBackupSpec{ClusterName: "ghost", Destination: dest}}}
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	ec = unmanagedCluster(ns)
	if err := r.GatherAndApply(ctx, ec, enabling); err != nil {
		t.Fatal(err)
	}
	d = ec.Status.Downgrade
	if d == nil || !strings.HasPrefix(d.Backup, "ghost-before-downgrade-3-6-") {
		t.Fatalf("status.downgrade %+v: want a backup named after the downgrade", d)
	}
	var b stewardv1.EtcdBackup
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: d.Backup}, &b); err != nil {
		t.Fatalf("the backup named in status: %v", err)
	}
	if b.Spec.ClusterName != "ghost" || b.Spec.Destination.Volume == nil || !b.Spec.Verify {
		t.Errorf("backup spec %+v: want the first schedule's (nightly, verified) destination", b.Spec)
	}
	// The running manager's backup controller may already have failed it (the cluster exists only
	// in this test): the fact carries whatever the object says, and a gone backup says so.
	fact, err := r.DowngradeBackup(ctx, ec)
	if err != nil || fact == nil || fact.Name != d.Backup || fact.Phase == stewardv1.BackupSucceeded {
		t.Errorf("the plan's fact of the backup: %+v, %v", fact, err)
	}
	if err := env.Client.Delete(ctx, &b); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&b), &b); err == nil && b.DeletionTimestamp == nil {
		t.Fatal("the backup was not deleted")
	}
	if fact, err := r.DowngradeBackup(ctx, ec); err != nil || fact == nil || fact.Name != d.Backup ||
		(fact.Phase != "" && b.DeletionTimestamp == nil) {
		t.Errorf("the plan's fact of a deleted backup: %+v, %v", fact, err)
	}
}
