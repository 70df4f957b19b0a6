package v1alpha1_test

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func s3Dest() stewardv1.BackupStorage {
	return stewardv1.BackupStorage{S3: &stewardv1.S3Storage{Bucket: "backups", Endpoint: "http://10.0.0.1:7070", ForcePathStyle: true,
		CredentialsSecretRef: stewardv1.S3CredentialsRef{Name: "s3"}}}
}

func newBackup(mutate func(*stewardv1.EtcdBackup)) *stewardv1.EtcdBackup {
	nameSeq++
	b := &stewardv1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("b%d", nameSeq), Namespace: "default"},
		Spec:       stewardv1.EtcdBackupSpec{ClusterName: "demo", Destination: s3Dest()},
	}
	if mutate != nil {
		mutate(b)
	}
	return b
}

func TestBackupDefaults(t *testing.T) {
	b := newBackup(nil)
	if err := env.Client.Create(ctx(t), b); err != nil {
		t.Fatal(err)
	}
	s := b.Spec
	if s.Compression != stewardv1.CompressionZstd || s.DeletionPolicy != stewardv1.DeletionRetain || s.Destination.S3.Region != "us-east-1" ||
		s.Destination.S3.CredentialsSecretRef.AccessKeyIDKey != "accessKeyID" ||
		s.Destination.S3.CredentialsSecretRef.SecretAccessKeyKey != "secretAccessKey" {
		t.Fatalf("defaults not applied: %+v / %+v", s, s.Destination.S3)
	}
}

func TestBackupValidation(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*stewardv1.EtcdBackup)
		want   string
	}{
		{"s3", nil, ""},
		{"volume", func(b *stewardv1.EtcdBackup) {
			b.Spec.Destination = stewardv1.BackupStorage{Volume: &stewardv1.VolumeStorage{PersistentVolumeClaimName: "backups", Path: "etcd/prod"}}
		}, ""},
		{"no destination", func(b *stewardv1.EtcdBackup) { b.Spec.Destination = stewardv1.BackupStorage{} }, "set exactly one of s3 or volume"},
		{"both destinations", func(b *stewardv1.EtcdBackup) {
			b.Spec.Destination.Volume = &stewardv1.VolumeStorage{PersistentVolumeClaimName: "backups"}
		}, "set exactly one of s3 or volume"},
		{"empty bucket", func(b *stewardv1.EtcdBackup) { b.Spec.Destination.S3.Bucket = "" }, "spec.destination.s3.bucket"},
		{"endpoint without scheme", func(b *stewardv1.EtcdBackup) { b.Spec.Destination.S3.Endpoint = "minio:9000" }, "spec.destination.s3.endpoint"},
		{"absolute prefix", func(b *stewardv1.EtcdBackup) { b.Spec.Destination.S3.Prefix = "/x" }, "prefix must not start with '/'"},
		{"no credentials", func(b *stewardv1.EtcdBackup) { b.Spec.Destination.S3.CredentialsSecretRef.Name = "" }, "credentialsSecretRef.name"},
		{"volume path escapes", func(b *stewardv1.EtcdBackup) {
			b.Spec.Destination = stewardv1.BackupStorage{Volume: &stewardv1.VolumeStorage{PersistentVolumeClaimName: "backups", Path: "../x"}}
		}, "path must be relative"},
		{"no cluster", func(b *stewardv1.EtcdBackup) { b.Spec.ClusterName = "" }, "spec.clusterName"},
		{"bad compression", func(b *stewardv1.EtcdBackup) { b.Spec.Compression = "gzip" }, "spec.compression"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expectResult(t, env.Client.Create(ctx(t), newBackup(tc.mutate)), tc.want)
		})
	}
}

func TestBackupSpecImmutable(t *testing.T) {
	b := newBackup(nil)
	if err := env.Client.Create(ctx(t), b); err != nil {
		t.Fatal(err)
	}
	b.Spec.ClusterName = "other"
	expectResult(t, env.Client.Update(ctx(t), b), "spec is immutable: create a new EtcdBackup")
}

func TestBackupScheduleValidation(t *testing.T) {
	nameSeq++
	s := &stewardv1.EtcdBackupSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", nameSeq), Namespace: "default"},
		Spec:       stewardv1.EtcdBackupScheduleSpec{Schedule: "@hourly", Template: newBackup(nil).Spec},
	}
	if err := env.Client.Create(ctx(t), s); err != nil {
		t.Fatal(err)
	}
	if s.Spec.Retention.KeepLast == nil || *s.Spec.Retention.KeepLast != 7 || s.Spec.ConcurrencyPolicy != "Forbid" {
		t.Fatalf("defaults not applied: %+v", s.Spec)
	}
	bad := s.DeepCopy()
	bad.ResourceVersion, bad.Name = "", bad.Name+"x"
	bad.Spec.Template.Destination = stewardv1.BackupStorage{}
	expectResult(t, env.Client.Create(ctx(t), bad), "set exactly one of s3 or volume")
	bad.Spec.Template.Destination = s3Dest()
	bad.Spec.ConcurrencyPolicy = "Allow"
	expectResult(t, env.Client.Create(ctx(t), bad), "spec.concurrencyPolicy")

	cont := s.DeepCopy()
	cont.ResourceVersion, cont.Name = "", s.Name+"c"
	cont.Spec.Continuous = &stewardv1.ContinuousBackupSpec{}
	if err := env.Client.Create(ctx(t), cont); err != nil {
		t.Fatal(err)
	}
	if c := cont.Spec.Continuous; c.SegmentSeconds != 5 || c.SegmentMaxMiB != 8 {
		t.Errorf("continuous defaults not applied: %+v", c)
	}
	bad = cont.DeepCopy()
	bad.ResourceVersion, bad.Name = "", cont.Name+"v"
	bad.Spec.Template.Destination = stewardv1.BackupStorage{Volume: &stewardv1.VolumeStorage{PersistentVolumeClaimName: "backups"}}
	expectResult(t, env.Client.Create(ctx(t), bad), "spec.continuous needs an S3 destination")
	bad.Spec.Template.Destination = s3Dest()
	bad.Spec.Continuous.SegmentSeconds = 0
	bad.Spec.Continuous.SegmentMaxMiB = 1000
	expectResult(t, env.Client.Create(ctx(t), bad), "spec.continuous.segmentMaxMiB")
}

func TestRestoreValidation(t *testing.T) {
	restore := func(r *stewardv1.RestoreSpec) func(*stewardv1.EtcdCluster) {
		return func(ec *stewardv1.EtcdCluster) { ec.Spec.Bootstrap = &stewardv1.BootstrapSpec{Restore: r} }
	}
	src := &stewardv1.RestoreSource{BackupStorage: s3Dest(), Key: "ns/demo/b1/snapshot.db.zst"}
	cases := []struct {
		name   string
		mutate func(*stewardv1.EtcdCluster)
		want   string
	}{
		{"from backup", restore(&stewardv1.RestoreSpec{BackupName: "b1"}), ""},
		{"from source", restore(&stewardv1.RestoreSpec{Source: src}), ""},
		{"neither", restore(&stewardv1.RestoreSpec{}), "set exactly one of backupName, source or pointInTime"},
		{"both", restore(&stewardv1.RestoreSpec{BackupName: "b1", Source: src}), "set exactly one of backupName, source or pointInTime"},
		{"to a revision", restore(&stewardv1.RestoreSpec{PointInTime: &stewardv1.PointInTimeSpec{ScheduleName: "s", Revision: ptr.To[int64](5)}}), ""},
		{"to a time", restore(&stewardv1.RestoreSpec{PointInTime: &stewardv1.PointInTimeSpec{ScheduleName: "s", Time: &metav1.Time{Time: time.Now()}}}), ""},
		{"a point and a backup", restore(&stewardv1.RestoreSpec{BackupName: "b1", PointInTime: &stewardv1.PointInTimeSpec{ScheduleName: "s", Revision: ptr.To[int64](5)}}),
			"set exactly one of backupName, source or pointInTime"},
		{"a point without a target", restore(&stewardv1.RestoreSpec{PointInTime: &stewardv1.PointInTimeSpec{ScheduleName: "s"}}), "set exactly one of revision or time"},
		{"a point with both targets", restore(&stewardv1.RestoreSpec{PointInTime: &stewardv1.PointInTimeSpec{ScheduleName: "s",
			Revision: ptr.To[int64](5), Time: &metav1.Time{Time: time.Now()}}}), "set exactly one of revision or time"},
		{"a point at revision 0", restore(&stewardv1.RestoreSpec{PointInTime: &stewardv1.PointInTimeSpec{ScheduleName: "s", Revision: ptr.To[int64](0)}}),
			"spec.bootstrap.restore.pointInTime.revision"},
		{"a point without a schedule", restore(&stewardv1.RestoreSpec{PointInTime: &stewardv1.PointInTimeSpec{Revision: ptr.To[int64](5)}}),
			"spec.bootstrap.restore.pointInTime.scheduleName"},
		{"source without key", restore(&stewardv1.RestoreSpec{Source: &stewardv1.RestoreSource{BackupStorage: s3Dest()}}), "spec.bootstrap.restore.source.key"},
		{"source with empty bucket", restore(&stewardv1.RestoreSpec{Source: &stewardv1.RestoreSource{Key: "k",
			BackupStorage: stewardv1.BackupStorage{S3: &stewardv1.S3Storage{CredentialsSecretRef: stewardv1.S3CredentialsRef{Name: "s3"}}}}}),
			"spec.bootstrap.restore.source.s3.bucket"},
		{"bad sha256", restore(&stewardv1.RestoreSpec{Source: &stewardv1.RestoreSource{BackupStorage: s3Dest(), Key: "k", SHA256: "abc"}}),
			"spec.bootstrap.restore.source.sha256"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expectResult(t, env.Client.Create(ctx(t), newCluster(tc.mutate)), tc.want)
		})
	}
}

func TestRestoreImmutable(t *testing.T) {
	ec := newCluster(func(ec *stewardv1.EtcdCluster) {
		ec.Spec.Bootstrap = &stewardv1.BootstrapSpec{Restore: &stewardv1.RestoreSpec{BackupName: "b1"}}
	})
	if err := env.Client.Create(ctx(t), ec); err != nil {
		t.Fatal(err)
	}
	if got := ec.Spec.Bootstrap.Restore.BumpRevision; got == nil || *got != 1_000_000_000 {
		t.Fatalf("bumpRevision default = %v, want 1000000000", got)
	}
	changed := ec.DeepCopy()
	changed.Spec.Bootstrap.Restore.BackupName = "b2"
	expectResult(t, env.Client.Update(ctx(t), changed), "spec.bootstrap is immutable")
	removed := ec.DeepCopy()
	removed.Spec.Bootstrap = nil
	expectResult(t, env.Client.Update(ctx(t), removed), "spec.bootstrap is immutable")

	plain := newCluster(nil)
	if err := env.Client.Create(ctx(t), plain); err != nil {
		t.Fatal(err)
	}
	plain.Spec.Bootstrap = &stewardv1.BootstrapSpec{Restore: &stewardv1.RestoreSpec{BackupName: "b1"}}
	expectResult(t, env.Client.Update(ctx(t), plain), "spec.bootstrap is immutable")
}
