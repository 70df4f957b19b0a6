package backupctl_test

import (
	"strings"
	"testing"
	"time"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/backupjob"
	"github.com/etcd-steward/steward/internal/streamer"
)

// A verified continuous schedule drills its chain once per new base, once revisions after that
// base are durable: a Job in the cluster's etcd image compares a random restorable revision with
// the live cluster through the client Service; its result, pass or fail, lands in
// status.continuous.lastDrill with an Event.
func TestScheduleDrillsItsChain(t *testing.T) {
	f := setup(t)
	prog := &fakeProgress{rep: &streamer.Report{DurableRevision: 42, HeadRevision: 42}}
	sr := f.scheduleReconciler(prog)
	ec := f.formedCluster()
	s := f.continuousSchedule(storage(), true)
	reconcile := func() *stewardv1.ContinuousBackupStatus {
		t.Helper()
		_, c := f.reconcileSchedule(sr, s)
		return c
	}
	d, _ := f.reconcileSchedule(sr, s)
	f.runningStreamer(d)
	labels := map[string]string{stewardv1.LabelSchedule: s.Name, stewardv1.LabelBackupOf: "db"}
	base := func(name string, done time.Time, labels map[string]string) {
		t.Helper()
		b := f.succeeded(name, "", labels, done)
		b.Status.ClusterUID = ec.UID
		if err := env.Client.Status().Update(f.ctx, b); err != nil {
			t.Fatal(err)
		}
	}

	// A base at revision 42 and nothing durable after it: no chain to drill yet.
	base("pitr-1", time.Now().Add(-time.Minute), labels)
	reconcile()
	if j := f.job("pitr-1", backupjob.TaskDrill); j != nil {
		t.Fatal("a drill before any revision after the base is durable")
	}
	prog.set(streamer.Report{DurableRevision: 50, HeadRevision: 50})
	reconcile()
	j := f.job("pitr-1", backupjob.TaskDrill)
	if j == nil {
		t.Fatal("no drill once revisions after the base are durable")
	}
	c := j.Spec.Template.Spec.Containers[0]
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"snapshot verify", "--pitr-prefix=" + f.ns + "/db", "--to-random-revision",
		"--endpoint=https://db-client." + f.ns + ".svc:2379", "--cacert=", "--bump-revision=1000000000", "--s3-bucket=backups"} {
		if !strings.Contains(args, want) {
			t.Errorf("drill args %q lack %q", args, want)
		}
	}
	if c.Image != "registry.local/etcd:v3.6.16" || len(j.OwnerReferences) != 1 || j.OwnerReferences[0].Kind != "EtcdBackupSchedule" {
		t.Errorf("drill Job image %s, owners %+v", c.Image, j.OwnerReferences)
	}
	if st := reconcile(); st.LastDrill != nil {
		t.Fatalf("a drill recorded while it runs: %+v", st.LastDrill)
	}

	f.finish(j, true, `{"verified":true,"targetRevision":47,"message":"the keyspace at revision 47 equals the live cluster's","durationSeconds":3.2}`)
	st := reconcile()
	if ld := st.LastDrill; ld == nil || ld.Base != "pitr-1" || !ld.Verified || ld.Revision != 47 || ld.DurationSeconds != 3 {
		t.Fatalf("lastDrill %+v", st.LastDrill)
	}
	if len(f.events.find("ChainDrillPassed")) != 1 {
		t.Errorf("events %v", f.events.list)
	}

	// The next base, one taken by hand, drills again; a drill that finds a difference says so.
	base("pitr-2", time.Now(), nil)
	reconcile()
	j2 := f.job("pitr-2", backupjob.TaskDrill)
	if j2 == nil {
		t.Fatal("no drill for the second base")
	}
	f.finish(j2, false, `{"error":"verification failed: restored to revision 48: the 27 keys differ from the source's at revision 48"}`)
	st = reconcile()
	if ld := st.LastDrill; ld == nil || ld.Base != "pitr-2" || ld.Verified || !strings.Contains(ld.Message, "differ from the source's") {
		t.Fatalf("lastDrill after a failed drill %+v", st.LastDrill)
	}
	if len(f.events.find("ChainDrillFailed")) != 1 {
		t.Errorf("events %v", f.events.list)
	}
	reconcile()
	if n := len(f.events.find("ChainDrillFailed")); n != 1 {
		t.Errorf("the failed drill reported %d times", n)
	}
}
