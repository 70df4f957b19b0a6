package backupctl

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/backupplan"
)

func backup(name, uid string, ago time.Duration, verify bool, v *stewardv1.BackupVerification) stewardv1.EtcdBackup {
	done := metav1.NewTime(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC).Add(-ago))
	b := stewardv1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(done.Add(-time.Minute))},
		Spec: stewardv1.EtcdBackupSpec{ClusterName: "db", Verify: verify}}
	b.Status.Phase, b.Status.CompletionTime, b.Status.ClusterUID, b.Status.Verification = stewardv1.BackupSucceeded, &done, types.UID("uid-"+uid), v
	if uid == "" {
		b.Status.ClusterUID = ""
	}
	return b
}

func cluster(uid string) *stewardv1.EtcdCluster {
	ec := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db"}}
	ec.UID = types.UID("uid-" + uid)
	return ec
}

func TestOf(t *testing.T) {
	ec := cluster("2")
	for _, tc := range []struct {
		uid  string
		want bool
	}{{"2", true}, {"1", false}, {"", false}} {
		b := backup("b", tc.uid, 0, false, nil)
		if got := Of(&b, ec); got != tc.want {
			t.Errorf("backup of uid %q: Of = %v, want %v", tc.uid, got, tc.want)
		}
	}
	other := backup("b", "2", 0, false, nil)
	other.Spec.ClusterName = "other"
	if Of(&other, ec) {
		t.Error("a backup of another name counts")
	}
	var empty stewardv1.EtcdCluster
	if b := backup("b", "", 0, false, nil); Of(&b, &empty) {
		t.Error("an unbound backup counts for a cluster with no UID")
	}
}

func TestPlanItemDrill(t *testing.T) {
	at := metav1.Now()
	for _, tc := range []struct {
		verify bool
		v      *stewardv1.BackupVerification
		want   backupplan.Drill
	}{
		{false, nil, backupplan.DrillNone},
		{false, &stewardv1.BackupVerification{Verified: true, Time: &at}, backupplan.DrillNone}, // not asked: not counted
		{true, nil, backupplan.DrillPending},
		{true, &stewardv1.BackupVerification{Verified: true}, backupplan.DrillPending}, // no time: no result yet
		{true, &stewardv1.BackupVerification{Verified: true, Time: &at}, backupplan.DrillPassed},
		{true, &stewardv1.BackupVerification{Time: &at, Message: "hash mismatch"}, backupplan.DrillFailed},
	} {
		b := backup("b", "1", time.Hour, tc.verify, tc.v)
		it := PlanItem(&b)
		if it.Drill != tc.want || it.Phase != backupplan.PhaseSucceeded || !it.Completed.Equal(b.Status.CompletionTime.Time) {
			t.Errorf("verify %v, %+v: item %+v, want drill %q", tc.verify, tc.v, it, tc.want)
		}
	}
}

// TestSummarizeNamesTheClusterAsItIsNow: a schedule's last success is among the backups of the
// cluster's current UID, preferring a verified one; Kept counts every backup it still holds.
func TestSummarizeNamesTheClusterAsItIsNow(t *testing.T) {
	at := metav1.Now()
	pass := &stewardv1.BackupVerification{Verified: true, Time: &at}
	backups := []stewardv1.EtcdBackup{
		backup("pred-newest", "1", time.Minute, true, pass), // the predecessor's, newest of all
		backup("own-verified", "2", 3*time.Hour, true, pass),
		backup("own-pending", "2", time.Hour, true, nil),
		backup("legacy", "", 2*time.Minute, false, nil),
	}
	r := &ScheduleReconciler{}
	s := &stewardv1.EtcdBackupSchedule{}
	r.summarize(s, cluster("2"), backups, "", backupplan.ScheduleDecision{})
	if got := s.Status.LastSuccessfulBackup; got == nil || got.Name != "own-verified" || !got.Verified {
		t.Errorf("lastSuccessfulBackup %+v, want own-verified (verified)", got)
	}
	if s.Status.Kept != 4 {
		t.Errorf("kept %d, want 4", s.Status.Kept)
	}
	r.summarize(s, &stewardv1.EtcdCluster{}, backups, "", backupplan.ScheduleDecision{})
	if s.Status.LastSuccessfulBackup != nil {
		t.Errorf("with the cluster gone: lastSuccessfulBackup %+v, want none", s.Status.LastSuccessfulBackup)
	}
}
