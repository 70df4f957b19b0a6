//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// TestBackupSchedule runs a schedule every minute that keeps 2 and verifies each backup: after 3
// runs exactly 2 snapshots remain in the bucket (the newest among them), each verified by a
// restore drill, BackupReady is True; suspended, it takes no more.
func TestBackupSchedule(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "sched", 1, "")
	dest, s3 := s3Storage(t, ns)
	putData(t, clientFor(t, ns, "sched"), "/s/", 50)
	createObj(t, &stewardv1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "every-minute"},
		Spec: stewardv1.EtcdBackupScheduleSpec{Schedule: "* * * * *", Verify: true,
			Template:  stewardv1.EtcdBackupSpec{ClusterName: "sched", Destination: dest},
			Retention: stewardv1.BackupRetention{KeepLast: ptr.To[int32](2)}}})

	var s stewardv1.EtcdBackupSchedule
	f.WaitFor(t, ns, "3 scheduled backups taken", 6*time.Minute, func(ctx context.Context) (bool, error) {
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "every-minute"}, &s); err != nil {
			return false, err
		}
		var list stewardv1.EtcdBackupList
		if err := f.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		taken := 0
		if s.Status.LastScheduleTime != nil {
			taken = int(s.Status.LastScheduleTime.Sub(s.CreationTimestamp.Time)/time.Minute) + 1
		}
		return taken >= 3 && s.Status.Active == "" && s.Status.Kept == 2, fmt.Errorf("about %d slots, kept %d, active %q, %d EtcdBackups",
			taken, s.Status.Kept, s.Status.Active, len(list.Items))
	})
	newest := s.Status.LastSuccessfulBackup
	if newest == nil {
		t.Fatal("no lastSuccessfulBackup")
	}
	prefix := ns + "/sched/"
	f.WaitFor(t, ns, "2 snapshots in the bucket", time.Minute, func(ctx context.Context) (bool, error) {
		objs, err := s3.List(ctx, prefix)
		if err != nil {
			return false, err
		}
		var snaps []string
		for _, o := range objs {
			if strings.Contains(o.Key, "/snapshot.db") {
				snaps = append(snaps, o.Key)
			}
		}
		hasNewest := false
		for _, k := range snaps {
			hasNewest = hasNewest || strings.Contains(k, "/"+newest.Name+"/")
		}
		return len(snaps) == 2 && hasNewest, fmt.Errorf("snapshots %v, newest %s", snaps, newest.Name)
	})
	var b stewardv1.EtcdBackup
	f.WaitFor(t, ns, "the newest backup verified", 2*time.Minute, func(ctx context.Context) (bool, error) {
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: newest.Name}, &b); err != nil {
			return false, err
		}
		v := b.Status.Verification
		return v != nil && v.Verified, fmt.Errorf("verification %+v", v)
	})
	t.Logf("MEASURE restore drill of a small backup: %ds", b.Status.Verification.DurationSeconds)
	f.WaitFor(t, ns, "BackupReady=True", time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, "sched")
		if err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(ec.Status.Conditions, "BackupReady") && ec.Status.Backup != nil,
			fmt.Errorf("%s; backup %+v", condition(ec, "BackupReady"), ec.Status.Backup)
	})

	ctx := context.Background()
	patch := []byte(`{"spec":{"suspend":true}}`)
	if err := f.Client.Patch(ctx, &s, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	var before stewardv1.EtcdBackupList
	if err := f.Client.List(ctx, &before, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	// Past the next slot, with the 15 s the schedule's controller would have had to act on it
	// (15 to 75 s; a fixed 75 s waited a whole minute more on average).
	slot := time.Now().Truncate(time.Minute).Add(time.Minute)
	time.Sleep(time.Until(slot.Add(15 * time.Second)))
	var after stewardv1.EtcdBackupList
	if err := f.Client.List(ctx, &after, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(after.Items) > len(before.Items) {
		t.Errorf("suspended schedule created backups past the slot of %s: %d before, %d after", slot.Format(time.TimeOnly), len(before.Items), len(after.Items))
	}
}

// TestBackupBadInput: wrong credentials, a missing bucket and an unreachable endpoint each end
// Failed with a message naming the cause, nothing else disturbed; a corrupted object is refused
// at restore with the reason in status.
func TestBackupBadInput(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "db", 1, "")
	dest, s3 := s3Storage(t, ns)
	before := uids(t, ns, "db")
	wrong := "wrong-credentials"
	createObj(t, secret(ns, wrong, map[string]string{"accessKeyID": s3.AccessKey, "secretAccessKey": "not-the-secret"}))
	cases := []struct {
		name   string
		mutate func(*stewardv1.S3Storage)
		want   []string
	}{
		{"bad-credentials", func(s *stewardv1.S3Storage) { s.CredentialsSecretRef.Name = wrong }, []string{"credentials"}},
		{"no-bucket", func(s *stewardv1.S3Storage) { s.Bucket = "no-such-bucket" }, []string{"no-such-bucket", "does not exist"}},
		{"unreachable", func(s *stewardv1.S3Storage) { s.Endpoint = "http://127.0.0.1:1" }, []string{"cannot reach", "127.0.0.1:1"}},
	}
	for _, tc := range cases {
		d := dest.DeepCopy()
		tc.mutate(d.S3)
		createObj(t, newBackup(ns, tc.name, "db", *d))
	}
	for _, tc := range cases {
		start := time.Now()
		b := backupDone(t, ns, tc.name, 3*time.Minute)
		t.Logf("MEASURE backup with %s fails: %.1fs", tc.name, time.Since(start).Seconds())
		if b.Status.Phase != stewardv1.BackupFailed {
			t.Errorf("%s: phase %s, want Failed", tc.name, b.Status.Phase)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.Status.Message, w) {
				t.Errorf("%s: message %q does not name %q", tc.name, b.Status.Message, w)
			}
		}
		if strings.Contains(b.Status.Message, "not-the-secret") || strings.Contains(b.Status.Message, s3.SecretKey) {
			t.Errorf("%s: the message leaks a secret key: %q", tc.name, b.Status.Message)
		}
	}
	assertPodsUntouched(t, ns, "db", before, "failed backups must disturb nothing")

	// A good backup, then its object corrupted: the restore refuses it and says why.
	createObj(t, newBackup(ns, "good", "db", dest))
	good := backupDone(t, ns, "good", 3*time.Minute)
	if good.Status.Phase != stewardv1.BackupSucceeded {
		t.Fatalf("good backup: %s %s", good.Status.Phase, good.Status.Message)
	}
	data, err := s3.Get(context.Background(), good.Status.Key)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := s3.Put(context.Background(), good.Status.Key, data); err != nil {
		t.Fatal(err)
	}
	create(t, newCluster(ns, "from-corrupt", 1, "", func(ec *stewardv1.EtcdCluster) {
		ec.Spec.Bootstrap = &stewardv1.BootstrapSpec{Restore: &stewardv1.RestoreSpec{BackupName: "good"}}
	}))
	f.WaitFor(t, ns, "the corrupted restore refused with the reason", 3*time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, "from-corrupt")
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(ec.Status.Conditions, "Restored")
		return c != nil && c.Reason == "RestoreFailed" && strings.Contains(c.Message, "sha256"), fmt.Errorf("%s", condition(ec, "Restored"))
	})
	create(t, newCluster(ns, "from-missing", 1, "", func(ec *stewardv1.EtcdCluster) {
		ec.Spec.Bootstrap = &stewardv1.BootstrapSpec{Restore: &stewardv1.RestoreSpec{BackupName: "bad-credentials"}}
	}))
	f.WaitFor(t, ns, "a restore from a failed backup refused", time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, "from-missing")
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(ec.Status.Conditions, "Restored")
		return c != nil && c.Reason == "RestoreRefused" && strings.Contains(c.Message, "Failed") && len(memberPods(t, ns, "from-missing")) == 0,
			fmt.Errorf("%s", condition(ec, "Restored"))
	})
}

func secret(ns, name string, data map[string]string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: data}
}
