package backupctl_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/backupctl"
	"github.com/etcd-steward/steward/internal/backupjob"
	"github.com/etcd-steward/steward/internal/testenv"
)

// These tests drive the backup and schedule reconcilers by hand against a real kube-apiserver.
// Nothing runs a Job there (no Job controller, no kubelet), so each test writes the Job's and its
// Pod's status itself, as the Job controller and the kubelet would; no storage is reached.

var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// events records what a reconciler reports.
type events struct {
	mu   sync.Mutex
	list []string
}

func (e *events) Eventf(_ runtime.Object, _ runtime.Object, kind, reason, _ string, note string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, kind+" "+reason+" "+fmt.Sprintf(note, args...))
}

func (e *events) AnnotatedEventf(o runtime.Object, rel runtime.Object, _ map[string]string, kind, reason, action string, note string, args ...any) {
	e.Eventf(o, rel, kind, reason, action, note, args...)
}

// find returns the events of the given reason.
func (e *events) find(reason string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, s := range e.list {
		if strings.Fields(s)[1] == reason {
			out = append(out, s)
		}
	}
	return out
}

type fixture struct {
	t      *testing.T
	ctx    context.Context
	ns     string
	events *events
	br     *backupctl.BackupReconciler
}

func setup(t *testing.T) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "backup-"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	br := &backupctl.BackupReconciler{Client: env.Client, APIReader: env.Client, Recorder: ev,
		Image: func(context.Context) (string, error) { return "steward:test", nil }}
	return &fixture{t: t, ctx: ctx, ns: ns.Name, events: ev, br: br}
}

func storage() stewardv1.BackupStorage {
	return stewardv1.BackupStorage{S3: &stewardv1.S3Storage{Bucket: "backups", Endpoint: "http://s3.local:7070",
		CredentialsSecretRef: stewardv1.S3CredentialsRef{Name: "s3"}}}
}

// succeeded creates a backup that finished (with the finalizer the reconciler adds first) at done.
func (f *fixture) succeeded(name string, policy stewardv1.BackupDeletionPolicy, labels map[string]string, done time.Time) *stewardv1.EtcdBackup {
	f.t.Helper()
	b := &stewardv1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Labels: labels, Finalizers: []string{stewardv1.FinalizerBackup}},
		Spec: stewardv1.EtcdBackupSpec{ClusterName: "db", Destination: storage(), DeletionPolicy: policy}}
	if err := env.Client.Create(f.ctx, b); err != nil {
		f.t.Fatal(err)
	}
	key := backupjob.SnapshotKey(b.Spec.Destination, f.ns, "db", name, stewardv1.CompressionZstd)
	at := metav1.NewTime(done)
	b.Status = stewardv1.EtcdBackupStatus{Phase: stewardv1.BackupSucceeded, ClusterUID: "uid-db", Key: key, Location: backupjob.Location(b.Spec.Destination, key),
		StartTime: &at, CompletionTime: &at, Revision: 42, Size: 4096, SHA256: "ab12", Compression: stewardv1.CompressionZstd}
	if err := env.Client.Status().Update(f.ctx, b); err != nil {
		f.t.Fatal(err)
	}
	return b
}

func (f *fixture) reconcile(name string) (ctrl.Result, error) {
	return f.br.Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: f.ns, Name: name}})
}

func (f *fixture) mustReconcile(name string) ctrl.Result {
	f.t.Helper()
	res, err := f.reconcile(name)
	if err != nil {
		f.t.Fatalf("reconcile %s: %v", name, err)
	}
	return res
}

func (f *fixture) delete(name string) {
	f.t.Helper()
	b := &stewardv1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}}
	if err := env.Client.Delete(f.ctx, b); err != nil {
		f.t.Fatal(err)
	}
}

// gone says whether the EtcdBackup no longer exists.
func (f *fixture) gone(name string) bool {
	f.t.Helper()
	err := env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &stewardv1.EtcdBackup{})
	if err != nil && !apierrors.IsNotFound(err) {
		f.t.Fatal(err)
	}
	return apierrors.IsNotFound(err)
}

// job returns the backup's Job of the given task, nil when there is none.
func (f *fixture) job(backup, task string) *batchv1.Job {
	f.t.Helper()
	var j batchv1.Job
	err := env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: backupjob.JobName(backup, task)}, &j)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		f.t.Fatal(err)
	}
	return &j
}

// finish writes the Job's end as the Job controller does, and its Pod's termination as the kubelet
// does.
func (f *fixture) finish(j *batchv1.Job, ok bool, message string) {
	f.t.Helper()
	f.pod(j, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: map[bool]int32{true: 0, false: 1}[ok],
		Message: message, Reason: "Completed"}})
	now := metav1.Now()
	j.Status.StartTime = &now
	if ok {
		j.Status.Succeeded, j.Status.CompletionTime = 1, &now
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	} else {
		j.Status.Failed = 3
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded, LastTransitionTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded,
				Message: "Job has reached the specified backoff limit", LastTransitionTime: now}}
	}
	if err := env.Client.Status().Update(f.ctx, j); err != nil {
		f.t.Fatal(err)
	}
}

// pod creates the Job's Pod with its etcd-less container in the given state.
func (f *fixture) pod(j *batchv1.Job, state corev1.ContainerState) {
	f.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: j.Name + "-", Namespace: f.ns,
		Labels: map[string]string{"job-name": j.Name}}, Spec: *j.Spec.Template.Spec.DeepCopy()}
	if err := env.Client.Create(f.ctx, p); err != nil {
		f.t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	if state.Terminated != nil {
		p.Status.Phase = corev1.PodSucceeded
		if state.Terminated.ExitCode != 0 {
			p.Status.Phase = corev1.PodFailed
		}
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image, State: state}}
	if err := env.Client.Status().Update(f.ctx, p); err != nil {
		f.t.Fatal(err)
	}
}

// deleteJobStarted reconciles a deleted backup until its delete Job exists and checks the Job.
func (f *fixture) deleteJobStarted(b *stewardv1.EtcdBackup) *batchv1.Job {
	f.t.Helper()
	if res := f.mustReconcile(b.Name); res.RequeueAfter == 0 {
		f.t.Error("no requeue after creating the delete Job")
	}
	j := f.job(b.Name, backupjob.TaskDelete)
	if j == nil {
		f.t.Fatal("no delete Job")
	}
	args := strings.Join(j.Spec.Template.Spec.Containers[0].Args, " ")
	if !strings.Contains(args, "delete") || !strings.Contains(args, backupjob.BackupKey(b.Status.Key)) ||
		j.Labels[stewardv1.LabelBackupTask] != backupjob.TaskDelete || j.Spec.Template.Spec.Containers[0].Image != "steward:test" {
		f.t.Errorf("delete Job labels %v, image %s, args %s", j.Labels, j.Spec.Template.Spec.Containers[0].Image, args)
	}
	if !slices.ContainsFunc(j.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Name == b.Name && o.Kind == "EtcdBackup" }) {
		f.t.Errorf("delete Job owners %v", j.OwnerReferences)
	}
	// The Job runs: the backup waits for it.
	if res := f.mustReconcile(b.Name); res.RequeueAfter == 0 || f.gone(b.Name) {
		f.t.Errorf("a running delete Job let the backup go (requeue %v)", res.RequeueAfter)
	}
	return j
}

// Deleting an EtcdBackup of policy Delete deletes its object through a delete Job first; one of
// policy Retain lets go at once and leaves the object.
func TestFinalizeFollowsDeletionPolicy(t *testing.T) {
	t.Run("Delete", func(t *testing.T) {
		f := setup(t)
		b := f.succeeded("b", stewardv1.DeletionDelete, nil, time.Now())
		f.delete(b.Name)
		j := f.deleteJobStarted(b)
		f.finish(j, true, `{"key":"x"}`)
		f.mustReconcile(b.Name)
		if !f.gone(b.Name) {
			t.Error("the backup stays after its object was deleted")
		}
		if ev := f.events.find("BackupObjectDeleted"); len(ev) != 1 || !strings.Contains(ev[0], b.Status.Location) {
			t.Errorf("events %v", f.events.list)
		}
		// A reconcile of a backup gone is nothing.
		if _, err := f.reconcile(b.Name); err != nil {
			t.Errorf("reconciling a backup that is gone: %v", err)
		}
	})
	t.Run("Retain", func(t *testing.T) {
		f := setup(t)
		b := f.succeeded("b", stewardv1.DeletionRetain, nil, time.Now())
		f.delete(b.Name)
		if res := f.mustReconcile(b.Name); res.RequeueAfter != 0 {
			t.Errorf("requeue %v", res.RequeueAfter)
		}
		if !f.gone(b.Name) || f.job(b.Name, backupjob.TaskDelete) != nil {
			t.Errorf("gone %v, delete Job %v", f.gone(b.Name), f.job(b.Name, backupjob.TaskDelete))
		}
		if len(f.events.list) != 0 {
			t.Errorf("events %v", f.events.list)
		}
	})
	// Only a Succeeded backup with a key has an object to delete.
	for _, tc := range []struct {
		name string
		edit func(s *stewardv1.EtcdBackupStatus)
	}{
		{"Delete, but the backup failed", func(s *stewardv1.EtcdBackupStatus) { s.Phase = stewardv1.BackupFailed }},
		{"Delete, but no key was recorded", func(s *stewardv1.EtcdBackupStatus) { s.Key = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t)
			b := f.succeeded("b", stewardv1.DeletionDelete, nil, time.Now())
			tc.edit(&b.Status)
			if err := env.Client.Status().Update(f.ctx, b); err != nil {
				t.Fatal(err)
			}
			f.delete(b.Name)
			f.mustReconcile(b.Name)
			if !f.gone(b.Name) || f.job(b.Name, backupjob.TaskDelete) != nil {
				t.Errorf("gone %v, delete Job %v", f.gone(b.Name), f.job(b.Name, backupjob.TaskDelete))
			}
		})
	}
	// With no image for the Job, the backup waits (the finalizer stays) rather than leaving its object.
	t.Run("Delete, no image", func(t *testing.T) {
		f := setup(t)
		f.br.Image = func(context.Context) (string, error) { return "", errors.New("no operator Pod") }
		b := f.succeeded("b", stewardv1.DeletionDelete, nil, time.Now())
		f.delete(b.Name)
		if _, err := f.reconcile(b.Name); err == nil || f.gone(b.Name) {
			t.Errorf("reconcile err %v, gone %v", err, f.gone(b.Name))
		}
	})
}

// A delete Job that fails is reported and given up: the object is left, the EtcdBackup goes (it
// must not block its namespace's deletion forever).
func TestFinalizeGivesUpOnAFailedDeleteJob(t *testing.T) {
	t.Run("the Job failed", func(t *testing.T) {
		f := setup(t)
		b := f.succeeded("b", stewardv1.DeletionDelete, nil, time.Now())
		f.delete(b.Name)
		j := f.deleteJobStarted(b)
		f.finish(j, false, "progress\n"+`{"error":"AccessDenied: the credentials may not delete"}`)
		f.mustReconcile(b.Name)
		if !f.gone(b.Name) {
			t.Error("a failed delete Job holds the backup")
		}
		ev := f.events.find("BackupObjectLeft")
		if len(ev) != 1 || !strings.HasPrefix(ev[0], corev1.EventTypeWarning) || !strings.Contains(ev[0], "AccessDenied") ||
			!strings.Contains(ev[0], b.Status.Location) {
			t.Errorf("events %v", f.events.list)
		}
		if len(f.events.find("BackupObjectDeleted")) != 0 {
			t.Errorf("a failed delete reported as done: %v", f.events.list)
		}
	})
	t.Run("its Pod cannot start", func(t *testing.T) {
		f := setup(t)
		b := f.succeeded("b", stewardv1.DeletionDelete, nil, time.Now())
		f.delete(b.Name)
		j := f.deleteJobStarted(b)
		f.pod(j, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError",
			Message: `secret "s3" not found`}})
		f.mustReconcile(b.Name)
		if !f.gone(b.Name) {
			t.Error("a delete Job that cannot start holds the backup")
		}
		if ev := f.events.find("BackupObjectLeft"); len(ev) != 1 || !strings.Contains(ev[0], `secret "s3" not found`) {
			t.Errorf("events %v", f.events.list)
		}
		// The Job is deleted: it would never start.
		var got batchv1.Job
		err := env.Client.Get(f.ctx, client.ObjectKeyFromObject(j), &got)
		if err == nil && got.DeletionTimestamp == nil {
			t.Error("the Job that cannot start is kept")
		}
	})
	// A failed Job whose Pod left an empty termination message (no result and no log to fall back
	// on: an OOM kill, say) is failed with the Job's own reason. It used to read as "still
	// running" (resultError("") is ""), so finalize waited on it forever and the EtcdBackup was
	// never let go; the same outcome held a save Job's backup in Running and a drill.
	t.Run("the Job failed without a result", func(t *testing.T) {
		f := setup(t)
		b := f.succeeded("b", stewardv1.DeletionDelete, nil, time.Now())
		f.delete(b.Name)
		j := f.deleteJobStarted(b)
		f.finish(j, false, "")
		f.mustReconcile(b.Name)
		if !f.gone(b.Name) {
			t.Error("a Job failed without a result holds the backup")
		}
		if ev := f.events.find("BackupObjectLeft"); len(ev) != 1 || !strings.Contains(ev[0], batchv1.JobReasonBackoffLimitExceeded) {
			t.Errorf("events %v, want one BackupObjectLeft naming the Job's reason", f.events.list)
		}
	})
}

// Retention prunes a schedule's old backups by deleting them with the pruned mark; the mark makes
// the finalizer delete their objects, whatever their deletionPolicy (Retain here). This is the
// documented behaviour (spec.deletionPolicy: "Backups pruned by a schedule's retention are removed
// either way"); the test pins it.
func TestPruneDeletesObjectsEvenUnderRetain(t *testing.T) {
	f := setup(t)
	sr := &backupctl.ScheduleReconciler{Client: env.Client, Recorder: f.events}
	s := &stewardv1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: f.ns},
		Spec: stewardv1.EtcdBackupScheduleSpec{Schedule: "0 3 1 1 *", // once a year: nothing falls due during the test
			Template:  stewardv1.EtcdBackupSpec{ClusterName: "db", Destination: storage(), DeletionPolicy: stewardv1.DeletionRetain},
			Retention: stewardv1.BackupRetention{KeepLast: ptr.To[int32](2)}}}
	if err := env.Client.Create(f.ctx, s); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{stewardv1.LabelSchedule: s.Name}
	now := time.Now()
	var names []string
	for i := range 4 { // oldest first
		b := f.succeeded(fmt.Sprintf("nightly-%d", i), stewardv1.DeletionRetain, labels, now.Add(time.Duration(i-4)*time.Hour))
		names = append(names, b.Name)
	}
	// A backup of another schedule, and one made by hand, are not this schedule's to prune.
	other := f.succeeded("other-0", stewardv1.DeletionRetain, map[string]string{stewardv1.LabelSchedule: "other"}, now.Add(-48*time.Hour))
	manual := f.succeeded("manual", stewardv1.DeletionRetain, nil, now.Add(-48*time.Hour))

	if _, err := sr.Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(s)}); err != nil {
		t.Fatal(err)
	}
	pruned := names[:2]
	for _, name := range names {
		var b stewardv1.EtcdBackup
		if err := env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &b); err != nil {
			t.Fatal(err)
		}
		want := slices.Contains(pruned, name)
		if got := b.DeletionTimestamp != nil; got != want {
			t.Errorf("%s deleting %v, want %v", name, got, want)
		}
		if got := b.Annotations[stewardv1.AnnotationPruned] == "true"; got != want {
			t.Errorf("%s pruned mark %v, want %v", name, got, want)
		}
	}
	for _, b := range []*stewardv1.EtcdBackup{other, manual} {
		if f.gone(b.Name) {
			t.Errorf("%s pruned by a schedule it is not of", b.Name)
		}
	}
	if ev := f.events.find("BackupPruned"); len(ev) != 2 {
		t.Errorf("pruned events %v", ev)
	}
	if _, err := sr.Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(s)}); err != nil {
		t.Fatal(err)
	}
	var got stewardv1.EtcdBackupSchedule
	if err := env.Client.Get(f.ctx, client.ObjectKeyFromObject(s), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Kept != 2 {
		t.Errorf("schedule keeps %d, want 2", got.Status.Kept)
	}
	if ev := f.events.find("BackupPruned"); len(ev) != 2 {
		t.Errorf("a second pass pruned again: %v", ev)
	}

	// The pruned backups' objects are deleted although their policy is Retain.
	for _, name := range pruned {
		var b stewardv1.EtcdBackup
		if err := env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &b); err != nil {
			t.Fatal(err)
		}
		j := f.deleteJobStarted(&b)
		f.finish(j, true, `{}`)
		f.mustReconcile(name)
		if !f.gone(name) {
			t.Errorf("pruned %s stays after its object was deleted", name)
		}
	}
	if ev := f.events.find("BackupObjectDeleted"); len(ev) != 2 {
		t.Errorf("deleted events %v", ev)
	}
	// The kept ones, deleted by hand, keep their objects (Retain).
	f.delete(names[3])
	f.mustReconcile(names[3])
	if !f.gone(names[3]) || f.job(names[3], backupjob.TaskDelete) != nil {
		t.Errorf("a kept Retain backup deleted by hand: gone %v, delete Job %v", f.gone(names[3]), f.job(names[3], backupjob.TaskDelete))
	}
}
