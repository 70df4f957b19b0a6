package backupctl_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/backupjob"
)

func (f *fixture) backup(name string, verify bool) *stewardv1.EtcdBackup {
	f.t.Helper()
	b := &stewardv1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: stewardv1.EtcdBackupSpec{ClusterName: "db", Destination: storage(), Verify: verify}}
	if err := env.Client.Create(f.ctx, b); err != nil {
		f.t.Fatal(err)
	}
	return b
}

func (f *fixture) get(name string) *stewardv1.EtcdBackup {
	f.t.Helper()
	var b stewardv1.EtcdBackup
	if err := env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &b); err != nil {
		f.t.Fatal(err)
	}
	return &b
}

// availableCluster creates the EtcdCluster "db" with the status a formed cluster has.
func (f *fixture) availableCluster() *stewardv1.EtcdCluster {
	f.t.Helper()
	ec := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: f.ns},
		Spec: stewardv1.EtcdClusterSpec{Replicas: ptr.To[int32](3), TLS: &stewardv1.TLSSpec{Enabled: ptr.To(false)},
			MemberTemplate: stewardv1.MemberTemplate{Version: "3.6.16"}}}
	if err := env.Client.Create(f.ctx, ec); err != nil {
		f.t.Fatal(err)
	}
	ec.Status.Members = []stewardv1.MemberStatus{{Name: "db-0", Role: stewardv1.RoleLeader, Ready: true}, {Name: "db-1", Role: stewardv1.RoleFollower, Ready: true}}
	meta.SetStatusCondition(&ec.Status.Conditions, metav1.Condition{Type: "Available", Status: metav1.ConditionTrue, Reason: "Quorum", Message: "ok"})
	if err := env.Client.Status().Update(f.ctx, ec); err != nil {
		f.t.Fatal(err)
	}
	return ec
}

// A backup of a cluster that does not exist fails at once, with the finalizer added first.
func TestBackupOfNoCluster(t *testing.T) {
	f := setup(t)
	f.backup("b", false)
	f.mustReconcile("b")
	b := f.get("b")
	if b.Status.Phase != stewardv1.BackupFailed || !strings.Contains(b.Status.Message, "does not exist") ||
		!slices.Contains(b.Finalizers, stewardv1.FinalizerBackup) {
		t.Errorf("phase %s, message %q, finalizers %v", b.Status.Phase, b.Status.Message, b.Finalizers)
	}
	// Failed is final: a later reconcile settles the unbound backup and changes nothing else.
	f.mustReconcile("b")
	if b := f.get("b"); b.Status.Phase != stewardv1.BackupFailed || b.Status.ClusterUID != "" ||
		meta.IsStatusConditionTrue(b.Status.Conditions, stewardv1.ConditionBound) {
		t.Errorf("after a second pass: %+v", b.Status)
	}
}

// A backup of an available cluster streams from a ready follower through a save Job, records the
// Job's result, and with verify runs the restore drill once.
func TestBackupRunsAndVerifies(t *testing.T) {
	f := setup(t)
	ec := f.availableCluster()
	f.backup("b", true)
	if res := f.mustReconcile("b"); res.RequeueAfter == 0 {
		t.Error("no requeue after starting")
	}
	b := f.get("b")
	if b.Status.Phase != stewardv1.BackupRunning || b.Status.Member != "db-1" || b.Status.ClusterUID != ec.UID || b.Status.Key == "" {
		t.Fatalf("started: %+v", b.Status)
	}
	// A second backup of the same cluster waits for the first.
	f.backup("b2", false)
	f.mustReconcile("b2")
	if b2 := f.get("b2"); b2.Status.Phase != stewardv1.BackupPending || !strings.Contains(b2.Status.Message, "b") {
		t.Errorf("second backup: %s %q", b2.Status.Phase, b2.Status.Message)
	}
	save := f.job("b", backupjob.TaskSave)
	if save == nil {
		t.Fatal("no save Job")
	}
	// Running: the backup waits.
	f.mustReconcile("b")
	if b := f.get("b"); b.Status.Phase != stewardv1.BackupRunning {
		t.Fatalf("phase %s while the Job runs", b.Status.Phase)
	}
	f.finish(save, true, `{"member":{"name":"db-1"},"clusterID":"c1","etcdVersion":"3.6.16","revision":77,"size":2048,"sha256":"ff"}`)
	f.mustReconcile("b")
	b = f.get("b")
	if b.Status.Phase != stewardv1.BackupSucceeded || b.Status.Revision != 77 || b.Status.SHA256 != "ff" || b.Status.CompletionTime == nil {
		t.Fatalf("after the Job: %+v", b.Status)
	}
	if len(f.events.find("BackupStarted")) != 1 || len(f.events.find("BackupSucceeded")) != 1 {
		t.Errorf("events %v", f.events.list)
	}
	// The drill.
	f.mustReconcile("b")
	drill := f.job("b", backupjob.TaskVerify)
	if drill == nil {
		t.Fatal("no verify Job")
	}
	f.mustReconcile("b")
	if b := f.get("b"); b.Status.Verification != nil && b.Status.Verification.Time != nil {
		t.Fatalf("verified before the drill ended: %+v", b.Status.Verification)
	}
	f.finish(drill, true, `{"verified":true,"revision":77,"durationSeconds":2.4,"message":"restored"}`)
	f.mustReconcile("b")
	v := f.get("b").Status.Verification
	if v == nil || v.Time == nil || !v.Verified || v.Revision != 77 || v.DurationSeconds != 2 {
		t.Errorf("verification %+v", v)
	}
	if len(f.events.find("BackupVerified")) != 1 {
		t.Errorf("events %v", f.events.list)
	}
}

// A save Job that fails fails the backup with the Job's reason; one that disappears too.
func TestBackupJobFails(t *testing.T) {
	f := setup(t)
	f.availableCluster()
	f.backup("b", false)
	f.mustReconcile("b")
	f.finish(f.job("b", backupjob.TaskSave), false, `{"error":"bucket backups does not exist"}`)
	f.mustReconcile("b")
	if b := f.get("b"); b.Status.Phase != stewardv1.BackupFailed || b.Status.Message != "bucket backups does not exist" {
		t.Errorf("phase %s, message %q", b.Status.Phase, b.Status.Message)
	}
	if ev := f.events.find("BackupFailed"); len(ev) != 1 {
		t.Errorf("events %v", f.events.list)
	}

	f.backup("c", false)
	f.mustReconcile("c")
	j := f.job("c", backupjob.TaskSave)
	if err := env.Client.Delete(f.ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.job("c", backupjob.TaskSave) != nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	f.mustReconcile("c")
	if b := f.get("c"); b.Status.Phase != stewardv1.BackupFailed || !strings.Contains(b.Status.Message, "disappeared") {
		t.Errorf("phase %s, message %q", b.Status.Phase, b.Status.Message)
	}
}
