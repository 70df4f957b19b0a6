package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/backupjob"
	"github.com/etcd-steward/steward/internal/backupplan"
)

// resolvePointInTime finds where a point-in-time restore's chain lives (the schedule's destination,
// under its cluster's key) and holds, with the ranges there are, a target the schedule's last
// report says no restore reaches: nothing is created for a revision in a hole or a time before the
// first base. A target past the durable end is held too, until the streamer gets there.
func (r *EtcdClusterReconciler) resolvePointInTime(ctx context.Context, ec *stewardv1.EtcdCluster, p *stewardv1.PointInTimeSpec) (*restoreSource, error) {
	src := &restoreSource{name: fmt.Sprintf("schedule %s", p.ScheduleName)}
	var s stewardv1.EtcdBackupSchedule
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: ec.Namespace, Name: p.ScheduleName}, &s)
	if apierrors.IsNotFound(err) {
		src.hold = fmt.Sprintf("EtcdBackupSchedule %q does not exist in namespace %q", p.ScheduleName, ec.Namespace)
		return src, nil
	} else if err != nil {
		return nil, err
	}
	src.storage = s.Spec.Template.Destination
	src.pitr = &backupjob.PointInTime{Prefix: backupjob.ClusterKey(s.Spec.Template.Destination, s.Namespace, s.Spec.Template.ClusterName)}
	if p.Revision != nil {
		src.pitr.ToRevision, src.revision = *p.Revision, *p.Revision
		src.name += fmt.Sprintf(" at revision %d", *p.Revision)
	} else if p.Time != nil {
		src.pitr.ToTime = p.Time.UTC().Format(time.RFC3339Nano)
		src.name += " at " + src.pitr.ToTime
	}
	src.hold = backupplan.PointInTimeHold(s.Status.Continuous, p)
	return src, nil
}

// restoredRevision is the revision the seed's restore-fetch reported restoring (its result line),
// 0 when it did not finish or reported none. pending says a Pod still runs a restore-fetch whose
// result its status does not show yet: the member can answer before the kubelet posts that status,
// and a time target's revision is known only from it.
func restoredRevision(o *observed) (rev int64, pending bool) {
	for _, p := range o.pods {
		fetches := false
		for _, c := range p.Spec.InitContainers {
			fetches = fetches || c.Name == backupjob.RestoreFetchContainer
		}
		reported := false
		for _, s := range p.Status.InitContainerStatuses {
			if s.Name != backupjob.RestoreFetchContainer || s.State.Terminated == nil {
				continue
			}
			reported = true
			if s.State.Terminated.ExitCode != 0 {
				continue
			}
			var res struct {
				Revision int64 `json:"revision"`
				Skipped  bool  `json:"skipped"`
			}
			msg := strings.TrimSpace(s.State.Terminated.Message)
			if i := strings.LastIndex(msg, "\n"); i >= 0 {
				msg = msg[i+1:]
			}
			if json.Unmarshal([]byte(msg), &res) == nil && !res.Skipped && res.Revision > 0 {
				return res.Revision, false
			}
		}
		pending = pending || (fetches && !reported)
	}
	return 0, pending
}

// streamerFresh is how recent a streamer's report must be for it to count as running: a streamer
// not heard from in that long no longer holds Steward's compactions back.
const streamerFresh = 2 * time.Minute

// continuousDurable is the lowest durable revision of this cluster's running continuous backups
// (0 when none runs).
func (r *EtcdClusterReconciler) continuousDurable(ctx context.Context, ec *stewardv1.EtcdCluster) (int64, error) {
	var list stewardv1.EtcdBackupScheduleList
	if err := r.Client.List(ctx, &list, client.InNamespace(ec.Namespace)); err != nil {
		return 0, err
	}
	return lowestDurable(list.Items, ec.Name, r.now()), nil
}

func lowestDurable(schedules []stewardv1.EtcdBackupSchedule, cluster string, now time.Time) int64 {
	var low int64
	for _, s := range schedules {
		c := s.Status.Continuous
		if s.Spec.Template.ClusterName != cluster || s.Spec.Continuous == nil || c == nil || c.DurableRevision <= 0 ||
			c.ReportedAt == nil || now.Sub(c.ReportedAt.Time) > streamerFresh {
			continue
		}
		if low == 0 || c.DurableRevision < low {
			low = c.DurableRevision
		}
	}
	return low
}
