package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/backupjob"
	"github.com/etcd-steward/steward/internal/backupkey"
	"github.com/etcd-steward/steward/internal/resources"
)

// ConditionRestored is set on a cluster that bootstraps from a snapshot.
const ConditionRestored = "Restored"

// restoreSource is the snapshot a new cluster is seeded from, resolved before its seed starts.
type restoreSource struct {
	// name is what status.restore.source says: the backup's name or the object's location.
	name     string
	storage  stewardv1.BackupStorage
	key      string
	sha256   string
	revision int64
	// pitr is set for a point-in-time restore: the seed replays the chain itself.
	pitr *backupjob.PointInTime
	// hold says why the restore cannot go ahead; nothing is created while it is set.
	hold string
}

// resolveRestore reads spec.bootstrap.restore for a cluster that never formed. A formed cluster
// never looks at it again: the restore happened (or the data is live) and must not happen twice.
func (r *EtcdClusterReconciler) resolveRestore(ctx context.Context, ec *stewardv1.EtcdCluster) (*restoreSource, error) {
	src, err := r.resolveRestoreSource(ctx, ec)
	if err != nil || src == nil || src.hold != "" {
		return src, err
	}
	// An encrypted destination's key must be there and parse before the seed is created: a
	// missing Secret would leave it stuck mounting, with no word in status.
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	if _, err := backupkey.Check(ctx, reader, ec.Namespace, src.storage); err != nil {
		var problem *backupkey.Problem
		if !errors.As(err, &problem) {
			return nil, err
		}
		src.hold = problem.Error()
	}
	return src, nil
}

func (r *EtcdClusterReconciler) resolveRestoreSource(ctx context.Context, ec *stewardv1.EtcdCluster) (*restoreSource, error) {
	rs := restoreSpec(ec)
	if rs == nil || ec.Status.ClusterID != "" {
		return nil, nil
	}
	if rs.Source != nil {
		return &restoreSource{name: backupjob.Location(rs.Source.BackupStorage, rs.Source.Key),
			storage: rs.Source.BackupStorage, key: rs.Source.Key, sha256: rs.Source.SHA256}, nil
	}
	if rs.PointInTime != nil {
		return r.resolvePointInTime(ctx, ec, rs.PointInTime)
	}
	var b stewardv1.EtcdBackup
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: ec.Namespace, Name: rs.BackupName}, &b)
	if apierrors.IsNotFound(err) {
		return &restoreSource{name: rs.BackupName, hold: fmt.Sprintf("EtcdBackup %q does not exist in namespace %q", rs.BackupName, ec.Namespace)}, nil
	} else if err != nil {
		return nil, err
	}
	src := &restoreSource{name: b.Name, storage: b.Spec.Destination, key: b.Status.Key, sha256: b.Status.SHA256, revision: b.Status.Revision}
	switch {
	case b.Status.Phase != stewardv1.BackupSucceeded:
		phase := string(b.Status.Phase)
		if phase == "" {
			phase = string(stewardv1.BackupPending)
		}
		src.hold = fmt.Sprintf("EtcdBackup %q is %s, not Succeeded: only a finished backup can be restored", b.Name, phase)
		if b.Status.Message != "" {
			src.hold += " (" + b.Status.Message + ")"
		}
	case newerMinor(b.Status.EtcdVersion, ec.Spec.Version):
		src.hold = fmt.Sprintf("EtcdBackup %q was taken by etcd %s, a newer minor than spec.version %s: etcd cannot run data of a newer minor",
			b.Name, b.Status.EtcdVersion, ec.Spec.Version)
	case b.Status.Key == "":
		src.hold = fmt.Sprintf("EtcdBackup %q records no object key", b.Name)
	}
	return src, nil
}

// restoreSpec is what seeds a cluster that has not formed: spec.bootstrap.restore, or the backup a
// quorum recovery without survivor rebuilds the cluster from (it dropped every member and the old
// cluster ID first).
func restoreSpec(ec *stewardv1.EtcdCluster) *stewardv1.RestoreSpec {
	if qr := ec.Status.QuorumRecovery; qr != nil && qr.InProgress != nil && qr.InProgress.RestoreFrom != "" {
		rs := &stewardv1.RestoreSpec{BackupName: qr.InProgress.RestoreFrom}
		if ec.Spec.Bootstrap != nil && ec.Spec.Bootstrap.Restore != nil {
			rs.BumpRevision = ec.Spec.Bootstrap.Restore.BumpRevision
		}
		return rs
	}
	if ec.Spec.Bootstrap == nil {
		return nil
	}
	return ec.Spec.Bootstrap.Restore
}

// newerMinor says whether version a has a higher major.minor than b.
func newerMinor(a, b string) bool {
	var am, an, bm, bn int
	if _, err := fmt.Sscanf(a, "%d.%d", &am, &an); err != nil {
		return false
	}
	if _, err := fmt.Sscanf(b, "%d.%d", &bm, &bn); err != nil {
		return false
	}
	return am > bm || (am == bm && an > bn)
}

func minorOf(version string) string {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return ""
	}
	return parts[0] + "." + parts[1]
}

// withRestore adds the fetch and restore init containers to the seed's Pod.
func (r *EtcdClusterReconciler) withRestore(ctx context.Context, ec *stewardv1.EtcdCluster, pod *corev1.Pod, src *restoreSource,
	initialCluster string) error {
	image, err := r.Image(ctx)
	if err != nil {
		return fmt.Errorf("restore needs the Steward image: %w", err)
	}
	bump := int64(1_000_000_000)
	if rs := restoreSpec(ec); rs != nil && rs.BumpRevision != nil {
		bump = *rs.BumpRevision
	}
	inits, vols := backupjob.RestoreInitContainers(backupjob.Restore{
		Image: image, EtcdImage: pod.Spec.Containers[0].Image, Storage: src.storage, Key: src.key, SHA256: src.sha256, PointInTime: src.pitr,
		MaxMinor: minorOf(ec.Spec.Version), Member: pod.Name, PeerURL: resources.PeerURL(ec, pod.Name),
		InitialCluster: initialCluster, Token: resources.ClusterToken(ec), Bump: bump,
		MountPath: resources.DataMountPath, DataDir: resources.DataMountPath + "/data", VolumeName: "data",
	})
	pod.Spec.InitContainers = append(pod.Spec.InitContainers, inits...)
	pod.Spec.Volumes = append(pod.Spec.Volumes, vols...)
	return nil
}

// setRestoreStatus records a finished restore once, and while it runs says how it goes: a fetch or
// etcdutl that failed (a corrupted or unreadable object) is named with its own message.
func (r *EtcdClusterReconciler) setRestoreStatus(ec *stewardv1.EtcdCluster, o *observed) {
	if restoreSpec(ec) == nil {
		return
	}
	cond := metav1.Condition{Type: ConditionRestored, ObservedGeneration: ec.Generation}
	switch {
	case ec.Status.Restore != nil:
		return
	case ec.Status.ClusterID != "":
		now := metav1.NewTime(r.now())
		src := ""
		var rev int64
		if o.restore != nil {
			src, rev = o.restore.name, o.restore.revision
		}
		fetched, pending := restoredRevision(o)
		if fetched > 0 {
			rev = fetched // a time target: the revision the seed's fetch chose
		} else if pending && rev == 0 {
			return // the seed answers before its Pod's status shows which revision the fetch chose
		}
		ec.Status.Restore = &stewardv1.RestoreStatus{Source: src, Revision: rev, RestoredAt: &now}
		cond.Status, cond.Reason = metav1.ConditionTrue, "Restored"
		at := fmt.Sprintf("revision %d", rev)
		if rev == 0 {
			at = "revision unknown" // an object restored by key without a manifest, or the seed Pod that reported it replaced
		}
		cond.Message = fmt.Sprintf("restored from %s (%s), new cluster ID %s", src, at, ec.Status.ClusterID)
		r.event(ec, corev1.EventTypeNormal, "Restored", "%s", cond.Message)
	case o.restore != nil && o.restore.hold != "":
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "RestoreRefused", o.restore.hold
	default:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "Restoring", "seeding the cluster from the snapshot"
		if msg := restoreFailure(o); msg != "" {
			cond.Reason, cond.Message = "RestoreFailed", msg
		}
	}
	if old := meta.FindStatusCondition(ec.Status.Conditions, ConditionRestored); cond.Reason == "RestoreFailed" &&
		(old == nil || old.Reason != cond.Reason) {
		r.event(ec, corev1.EventTypeWarning, "RestoreFailed", "%s", cond.Message)
	}
	meta.SetStatusCondition(&ec.Status.Conditions, cond)
}

// restoreFailure is the message of a restore init container that exited with an error.
func restoreFailure(o *observed) string {
	for _, p := range o.pods {
		for _, s := range p.Status.InitContainerStatuses {
			t := s.State.Terminated
			if t == nil && s.LastTerminationState.Terminated != nil {
				t = s.LastTerminationState.Terminated
			}
			if t != nil && t.ExitCode != 0 && (s.Name == backupjob.RestoreFetchContainer || s.Name == backupjob.RestoreContainer) {
				return fmt.Sprintf("%s on %s failed: %s", s.Name, p.Name, strings.TrimSpace(errorLine(t.Message)))
			}
		}
	}
	return ""
}

// errorLine is the "error" of a JSON result line, or the message as it is.
func errorLine(msg string) string {
	var res struct {
		Error string `json:"error"`
	}
	line := strings.TrimSpace(msg)
	if i := strings.LastIndex(line, "\n"); i >= 0 {
		line = line[i+1:]
	}
	if json.Unmarshal([]byte(line), &res) == nil && res.Error != "" {
		return res.Error
	}
	if len(msg) > 500 {
		msg = msg[len(msg)-500:]
	}
	return msg
}
