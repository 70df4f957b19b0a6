package backupctl_test

import (
	"strings"
	"testing"

	"filippo.io/age"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/backupjob"
	"github.com/etcd-steward/steward/internal/streamer"
)

func sealedStorage() stewardv1.BackupStorage {
	s := storage()
	s.Encryption = &stewardv1.BackupEncryption{KeySecretRef: stewardv1.EncryptionKeyRef{Name: "backup-key"}}
	return s
}

func identity(t *testing.T) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// setKey writes the key Secret (keys.txt holding text), creating it the first time.
func (f *fixture) setKey(text string) {
	f.t.Helper()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "backup-key", Namespace: f.ns}, Data: map[string][]byte{"keys.txt": []byte(text)}}
	if err := env.Client.Update(f.ctx, sec); err != nil {
		if err := env.Client.Create(f.ctx, sec); err != nil {
			f.t.Fatal(err)
		}
	}
}

// An encrypted backup starts only when its key Secret is there and parses: otherwise it fails at
// once saying which Secret and why (never its content), and no Job is created.
func TestEncryptedBackupNeedsItsKey(t *testing.T) {
	f := setup(t)
	f.availableCluster()
	create := func(name string) *stewardv1.EtcdBackup {
		t.Helper()
		b := &stewardv1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
			Spec: stewardv1.EtcdBackupSpec{ClusterName: "db", Destination: sealedStorage()}}
		if err := env.Client.Create(f.ctx, b); err != nil {
			t.Fatal(err)
		}
		f.mustReconcile(name)
		return f.get(name)
	}
	for _, tc := range []struct {
		name, secret, want string
	}{
		{"no-secret", "", `Secret "backup-key" does not exist`},
		{"not-age", "not-a-key-but-secret-words", "not an age identity file"},
	} {
		if tc.secret != "" {
			f.setKey(tc.secret)
		}
		b := create(tc.name)
		if b.Status.Phase != stewardv1.BackupFailed || !strings.Contains(b.Status.Message, tc.want) {
			t.Errorf("%s: phase %s, message %q; want Failed naming %q", tc.name, b.Status.Phase, b.Status.Message, tc.want)
		}
		if strings.Contains(b.Status.Message, "secret-words") {
			t.Errorf("%s: the message quotes the Secret: %q", tc.name, b.Status.Message)
		}
		if f.job(tc.name, backupjob.TaskSave) != nil {
			t.Errorf("%s: a Job was created", tc.name)
		}
	}
	f.setKey(identity(t).String() + "\n")
	b := create("keyed")
	j := f.job("keyed", backupjob.TaskSave)
	if b.Status.Phase != stewardv1.BackupRunning || j == nil || !strings.HasSuffix(b.Status.Key, ".age") {
		t.Fatalf("with its key: phase %s (%s), key %s, job %v", b.Status.Phase, b.Status.Message, b.Status.Key, j != nil)
	}
	if args := strings.Join(j.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--encryption-keys-file=") {
		t.Errorf("save Job args %s", args)
	}
}

// The streamer of an encrypted schedule: its template names the sealing key (status too), a
// rotation rolls it, and a key Secret gone leaves the running streamer alone and says so.
func TestEncryptedStreamerFollowsItsKey(t *testing.T) {
	f := setup(t)
	prog := &fakeProgress{}
	sr := f.scheduleReconciler(prog)
	f.formedCluster()
	s := f.continuousSchedule(sealedStorage(), false)
	reconcile := func() (*appsv1.Deployment, *stewardv1.ContinuousBackupStatus) { return f.reconcileSchedule(sr, s) }

	d, c := reconcile()
	if d != nil || c == nil || !strings.Contains(c.Waiting, `Secret "backup-key" does not exist`) {
		t.Fatalf("without its key: streamer %v, status %+v", d != nil, c)
	}
	old, rotated := identity(t), identity(t)
	f.setKey(old.String() + "\n")
	d, c = reconcile()
	if d == nil || d.Spec.Template.Annotations[backupjob.AnnotationKeyID] != old.Recipient().String() || c.KeyID != old.Recipient().String() || c.Waiting != "" {
		t.Fatalf("with its key: streamer %v, status %+v", d != nil, c)
	}
	f.setKey(rotated.String() + "\n" + old.String() + "\n")
	d, c = reconcile()
	if d.Spec.Template.Annotations[backupjob.AnnotationKeyID] != rotated.Recipient().String() || c.KeyID != rotated.Recipient().String() {
		t.Errorf("after a rotation: template key %s, status key %s; want %s", d.Spec.Template.Annotations[backupjob.AnnotationKeyID], c.KeyID, rotated.Recipient())
	}
	if err := env.Client.Delete(f.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "backup-key", Namespace: f.ns}}); err != nil {
		t.Fatal(err)
	}
	d, c = reconcile()
	if d == nil || !strings.Contains(c.Waiting, "does not exist") {
		t.Errorf("key Secret deleted: streamer kept %v, status %+v", d != nil, c)
	}

	// The streamer's own reason to wait reaches status too.
	f.setKey(rotated.String() + "\n")
	f.runningStreamer(d)
	prog.rep = &streamer.Report{Waiting: "no base backup yet: waiting for the first"}
	if _, c = reconcile(); c.Waiting != prog.rep.Waiting {
		t.Errorf("status.continuous.waiting %q, want the streamer's %q", c.Waiting, prog.rep.Waiting)
	}
}
