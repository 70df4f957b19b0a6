package controller

import (
	"time"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/schedule"
)

// defragScheduled: the defragmentation schedule fired since the member was last defragmented
// successfully, or since it was created. A schedule that does not parse fires nothing; the CRD's
// rule refuses most bad ones and defragScheduleError reports the rest.
func defragScheduled(ec *stewardv1.EtcdCluster, m *stewardv1.EtcdMember, now time.Time) bool {
	if !ec.Spec.DefragmentationEnabled() || ec.Spec.Maintenance == nil || ec.Spec.Maintenance.Defragmentation.Schedule == "" {
		return false
	}
	s, err := schedule.Parse(ec.Spec.Maintenance.Defragmentation.Schedule)
	if err != nil {
		return false
	}
	since := m.CreationTimestamp.Time
	if d := m.Status.Defragmentation; d != nil && d.LastSucceeded != nil && d.LastSucceeded.After(since) {
		since = d.LastSucceeded.Time
	}
	return s.FiredSince(ec.CreationTimestamp.Time, since, now)
}

// defragRequested: stewardv1.AnnotationDefragmentRequested on the cluster or on the member names a
// time after the member's last successful defragmentation (or its creation: a member that joined
// later has nothing old to compact). A time ahead of this operator's clock counts as now, so a
// requester's clock running fast cannot make a member defragment again and again.
func defragRequested(ec *stewardv1.EtcdCluster, m *stewardv1.EtcdMember, now time.Time) bool {
	since := m.CreationTimestamp.Time
	if d := m.Status.Defragmentation; d != nil && d.LastSucceeded != nil && d.LastSucceeded.After(since) {
		since = d.LastSucceeded.Time
	}
	for _, v := range []string{ec.Annotations[stewardv1.AnnotationDefragmentRequested], m.Annotations[stewardv1.AnnotationDefragmentRequested]} {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			continue
		}
		if t.After(now) {
			t = now
		}
		if t.After(since) {
			return true
		}
	}
	return false
}

// defragScheduleError says why spec.maintenance.defragmentation.schedule cannot be used; "" when
// it can (or is unset).
func defragScheduleError(ec *stewardv1.EtcdCluster) string {
	if ec.Spec.Maintenance == nil || ec.Spec.Maintenance.Defragmentation.Schedule == "" {
		return ""
	}
	if _, err := schedule.Parse(ec.Spec.Maintenance.Defragmentation.Schedule); err != nil {
		return "spec.maintenance.defragmentation." + err.Error()
	}
	return ""
}
