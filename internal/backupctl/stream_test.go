package backupctl_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/backupctl"
	"github.com/etcd-steward/steward/internal/backupjob"
	"github.com/etcd-steward/steward/internal/pitr"
	"github.com/etcd-steward/steward/internal/streamer"
)

// fakeProgress stands in for the streamer Pod's /progress (envtest runs no Pods).
type fakeProgress struct {
	mu  sync.Mutex
	rep *streamer.Report
}

func (p *fakeProgress) read(_ context.Context, _ *corev1.Pod) (streamer.Report, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rep == nil {
		return streamer.Report{}, errors.New("not answering")
	}
	return *p.rep, nil
}

// scheduleReconciler is the reconciler under test, reading streamer reports from prog.
func (f *fixture) scheduleReconciler(prog *fakeProgress) *backupctl.ScheduleReconciler {
	return &backupctl.ScheduleReconciler{Client: env.Client, APIReader: env.Client, Recorder: f.events, Progress: prog.read,
		Image: func(context.Context) (string, error) { return "steward:test", nil }, EtcdImageRepository: "registry.local/etcd"}
}

// formedCluster creates the EtcdCluster "db" with the cluster ID a formed cluster records.
func (f *fixture) formedCluster() *stewardv1.EtcdCluster {
	f.t.Helper()
	ec := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: f.ns},
		Spec: stewardv1.EtcdClusterSpec{Replicas: ptr.To[int32](3), MemberTemplate: stewardv1.MemberTemplate{Version: "3.6.16"}}}
	if err := env.Client.Create(f.ctx, ec); err != nil {
		f.t.Fatal(err)
	}
	ec.Status.ClusterID = "cafe"
	if err := env.Client.Status().Update(f.ctx, ec); err != nil {
		f.t.Fatal(err)
	}
	return ec
}

// continuousSchedule creates the schedule "pitr" of cluster "db" with continuous backup into dest.
func (f *fixture) continuousSchedule(dest stewardv1.BackupStorage, verify bool) *stewardv1.EtcdBackupSchedule {
	f.t.Helper()
	s := &stewardv1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "pitr", Namespace: f.ns},
		Spec: stewardv1.EtcdBackupScheduleSpec{Schedule: "0 3 1 1 *", Verify: verify,
			Template:   stewardv1.EtcdBackupSpec{ClusterName: "db", Destination: dest},
			Continuous: &stewardv1.ContinuousBackupSpec{SegmentSeconds: 5, SegmentMaxMiB: 8}}}
	if err := env.Client.Create(f.ctx, s); err != nil {
		f.t.Fatal(err)
	}
	return s
}

// reconcileSchedule reconciles s once and returns its streamer Deployment (nil when none) and its
// status.continuous.
func (f *fixture) reconcileSchedule(sr *backupctl.ScheduleReconciler, s *stewardv1.EtcdBackupSchedule) (*appsv1.Deployment, *stewardv1.ContinuousBackupStatus) {
	f.t.Helper()
	if _, err := sr.Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(s)}); err != nil {
		f.t.Fatal(err)
	}
	var got stewardv1.EtcdBackupSchedule
	if err := env.Client.Get(f.ctx, client.ObjectKeyFromObject(s), &got); err != nil {
		f.t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: backupjob.StreamName(s.Name)}, &d); err != nil {
		return nil, got.Status.Continuous
	}
	return &d, got.Status.Continuous
}

// runningStreamer creates the Pod of the streamer Deployment d, running, as a kubelet would.
func (f *fixture) runningStreamer(d *appsv1.Deployment) {
	f.t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: d.Name + "-x", Namespace: f.ns, Labels: d.Spec.Template.Labels},
		Spec: *d.Spec.Template.Spec.DeepCopy()}
	if err := env.Client.Create(f.ctx, pod); err != nil {
		f.t.Fatal(err)
	}
	pod.Status.Phase, pod.Status.PodIP = corev1.PodRunning, "10.0.0.9"
	if err := env.Client.Status().Update(f.ctx, pod); err != nil {
		f.t.Fatal(err)
	}
}

func (p *fakeProgress) set(rep streamer.Report) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rep = &rep
}

// A schedule with spec.continuous runs one streamer Deployment for a formed cluster, copies its
// report into status.continuous, takes a base at once after a hole, and removes the streamer when
// continuous is turned off.
func TestScheduleRunsItsStreamer(t *testing.T) {
	f := setup(t)
	prog := &fakeProgress{}
	sr := f.scheduleReconciler(prog)
	s := &stewardv1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "pitr", Namespace: f.ns},
		Spec: stewardv1.EtcdBackupScheduleSpec{Schedule: "0 3 1 1 *",
			Template:   stewardv1.EtcdBackupSpec{ClusterName: "db", Destination: storage()},
			Continuous: &stewardv1.ContinuousBackupSpec{SegmentSeconds: 3, SegmentMaxMiB: 4}}}
	if err := env.Client.Create(f.ctx, s); err != nil {
		t.Fatal(err)
	}
	reconcile := func() {
		t.Helper()
		if _, err := sr.Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(s)}); err != nil {
			t.Fatal(err)
		}
	}
	deployment := func() (*appsv1.Deployment, bool) {
		var d appsv1.Deployment
		err := env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: backupjob.StreamName(s.Name)}, &d)
		if apierrors.IsNotFound(err) || (err == nil && d.DeletionTimestamp != nil) {
			return nil, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return &d, true
	}

	// No cluster yet, then a cluster that has not formed: no streamer.
	reconcile()
	if _, ok := deployment(); ok {
		t.Fatal("a streamer for a cluster that does not exist")
	}
	ec := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: f.ns},
		Spec: stewardv1.EtcdClusterSpec{Replicas: ptr.To[int32](3), MemberTemplate: stewardv1.MemberTemplate{Version: "3.6.16"}}}
	if err := env.Client.Create(f.ctx, ec); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if _, ok := deployment(); ok {
		t.Fatal("a streamer for a cluster that has not formed")
	}
	ec.Status.ClusterID = "cafe"
	if err := env.Client.Status().Update(f.ctx, ec); err != nil {
		t.Fatal(err)
	}
	reconcile()
	d, ok := deployment()
	if !ok {
		t.Fatal("no streamer for a formed cluster")
	}
	args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{"stream ", "--prefix=" + f.ns + "/db", "--segment-interval=3s", "--segment-max-mib=4",
		"--endpoint=https://db-client." + f.ns + ".svc:2379", "--s3-bucket=backups", "--cacert="} {
		if !strings.Contains(args, want) {
			t.Errorf("streamer args %q lack %q", args, want)
		}
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || *d.Spec.Replicas != 1 || len(d.OwnerReferences) != 1 {
		t.Errorf("streamer Deployment %+v", d.Spec)
	}

	// The streamer's report lands in status.continuous.
	f.runningStreamer(d)
	now := time.Now().UTC().Truncate(time.Second)
	prog.rep = &streamer.Report{DurableRevision: 120, DurableTime: now, HeadRevision: 125,
		Restorable: []pitr.Range{{From: 100, To: 120, FromTime: now.Add(-time.Hour), ToTime: now, Base: "pitr-1"}}}
	reconcile()
	var got stewardv1.EtcdBackupSchedule
	if err := env.Client.Get(f.ctx, client.ObjectKeyFromObject(s), &got); err != nil {
		t.Fatal(err)
	}
	c := got.Status.Continuous
	if c == nil || c.DurableRevision != 120 || c.HeadRevision != 125 || c.LagRevisions != 5 || len(c.Restorable) != 1 ||
		c.Restorable[0].FromRevision != 100 || c.Restorable[0].Base != "pitr-1" || c.ReportedAt == nil {
		t.Fatalf("status.continuous %+v", c)
	}
	backups := func() []string {
		var list stewardv1.EtcdBackupList
		if err := env.Client.List(f.ctx, &list, client.InNamespace(f.ns)); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, b := range list.Items {
			names = append(names, b.Name)
		}
		return names
	}
	if n := backups(); len(n) != 0 {
		t.Fatalf("backups %v before any hole", n)
	}

	// A hole: a base is taken at once, once.
	prog.rep.Hole, prog.rep.HoleAt = "the watch from revision 121 was compacted", time.Now().Add(-time.Second)
	reconcile()
	first := backups()
	if len(first) != 1 || len(f.events.find("ContinuousBackupHole")) != 1 {
		t.Fatalf("after a hole: backups %v, events %v", first, f.events.list)
	}
	reconcile()
	if n := backups(); !slices.Equal(n, first) {
		t.Errorf("a second base for the same hole: %v", n)
	}

	// Continuous off: the streamer goes, and its status.
	if err := env.Client.Get(f.ctx, client.ObjectKeyFromObject(s), &got); err != nil {
		t.Fatal(err)
	}
	got.Spec.Continuous = nil
	if err := env.Client.Update(f.ctx, &got); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if _, ok := deployment(); ok {
		t.Error("the streamer stays after continuous was turned off")
	}
	if err := env.Client.Get(f.ctx, client.ObjectKeyFromObject(s), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Continuous != nil {
		t.Errorf("status.continuous %+v after continuous was turned off", got.Status.Continuous)
	}
}
