package backupctl

import (
	"context"
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/backupjob"
	"github.com/etcd-steward/steward/internal/resources"
)

// drillBump is the revision bump the chain drill restores with, as a real restore does.
const drillBump = 1_000_000_000

// reconcileDrill runs one drill of the chain for each new base of a verified continuous schedule:
// once revisions after the newest backup are durable (so the drill has a chain to replay), a Job
// drills a random restorable revision, and its result goes to status.continuous.lastDrill.
// A base is any successful backup of the cluster in the schedule's store, the schedule's own or
// one taken by hand: the streamer continues from whichever is newest.
func (r *ScheduleReconciler) reconcileDrill(ctx context.Context, s *stewardv1.EtcdBackupSchedule, ec *stewardv1.EtcdCluster) error {
	c := s.Status.Continuous
	if !s.Spec.Verify || s.Spec.Continuous == nil || c == nil || ec.Status.ClusterID == "" {
		return nil
	}
	var backups stewardv1.EtcdBackupList
	if err := r.Client.List(ctx, &backups, client.InNamespace(s.Namespace)); err != nil {
		return err
	}
	var newest *stewardv1.EtcdBackup
	for i := range backups.Items {
		b := &backups.Items[i]
		if Of(b, ec) && b.Status.Phase == stewardv1.BackupSucceeded && b.Status.CompletionTime != nil &&
			sameStore(b.Spec.Destination, s.Spec.Template.Destination) &&
			(newest == nil || b.Status.CompletionTime.After(newest.Status.CompletionTime.Time)) {
			newest = b
		}
	}
	if newest == nil || (c.LastDrill != nil && c.LastDrill.Base == newest.Name) || c.DurableRevision <= newest.Status.Revision {
		return nil
	}
	name := backupjob.JobName(newest.Name, backupjob.TaskDrill)
	out, err := readJob(ctx, r.Client, r.live(), s.Namespace, name)
	if err != nil {
		return err
	}
	switch {
	case out.missing:
		return r.startDrill(ctx, s, ec, newest, name)
	case !out.done && out.failed == "":
		return nil // running
	}
	d := &stewardv1.ChainDrill{Base: newest.Name, Time: metav1.NewTime(r.now())}
	if out.failed != "" {
		d.Message = out.failed
	} else if res, err := parseResult(out.message); err != nil {
		d.Message = "the drill's result cannot be read: " + err.Error()
	} else {
		d.Verified, d.Revision, d.Message = res.Verified, res.TargetRevision, res.Message
		d.DurationSeconds = int64(math.Round(res.DurationSeconds))
	}
	c.LastDrill = d
	if r.Recorder != nil {
		if d.Verified {
			r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, "ChainDrillPassed", "ChainDrillPassed", "revision %d restored from the chain equals the live cluster's: %s", d.Revision, d.Message)
		} else {
			r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, "ChainDrillFailed", "ChainDrillFailed", "%s", d.Message)
		}
	}
	return nil
}

func (r *ScheduleReconciler) startDrill(ctx context.Context, s *stewardv1.EtcdBackupSchedule, ec *stewardv1.EtcdCluster,
	base *stewardv1.EtcdBackup, name string) error {
	image, err := r.Image(ctx)
	if err != nil {
		return fmt.Errorf("no Steward image for the chain drill: %w", err)
	}
	t := ec.Spec.MemberTemplate
	if ec.Status.Observed != nil {
		t = *ec.Status.Observed
	}
	dest := s.Spec.Template.Destination
	j := backupjob.Job{Name: name, Namespace: s.Namespace, Backup: base.Name, Cluster: ec.Name, Image: image, Storage: dest,
		Key: backupjob.ClusterKey(dest, s.Namespace, ec.Name), Owner: metav1.NewControllerRef(s, stewardv1.GroupVersion.WithKind("EtcdBackupSchedule"))}
	var tls *backupjob.EtcdTLS
	if ec.TLSEnabled() {
		secret, err := JobClientSecret(ctx, r.Client, ec)
		if err != nil {
			return err
		}
		tls = &backupjob.EtcdTLS{SecretName: secret}
	}
	endpoint := fmt.Sprintf("%s://%s.%s.svc:%d", resources.Scheme(ec), resources.ClientServiceName(ec.Name), ec.Namespace, resources.ClientPort)
	err = r.Client.Create(ctx, backupjob.ChainDrillJob(j, resources.Image(&t, r.EtcdImageRepository), endpoint, tls, drillBump))
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// sameStore: the two destinations are the same bucket and prefix, so their backups share one chain.
func sameStore(a, b stewardv1.BackupStorage) bool {
	switch {
	case a.S3 != nil && b.S3 != nil:
		return a.S3.Bucket == b.S3.Bucket && a.S3.Endpoint == b.S3.Endpoint && a.S3.Prefix == b.S3.Prefix
	case a.Volume != nil && b.Volume != nil:
		return a.Volume.PersistentVolumeClaimName == b.Volume.PersistentVolumeClaimName && a.Volume.Path == b.Volume.Path
	}
	return false
}
