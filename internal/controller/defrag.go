package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/health"
	"github.com/etcd-steward/steward/internal/plan"
)

// defragment runs one planned defragmentation: intent on the member first (so a crash mid-call
// leaves a record the plan closes, and the member counts as disrupted meanwhile), then the call
// through the Disrupter, then the result and an Event. A failed defragmentation is recorded, not
// returned: the plan backs off and counts failures.
func (r *EtcdClusterReconciler) defragment(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed, m *stewardv1.EtcdMember, a plan.Action) error {
	var before int64
	if e, ok := o.facts.Etcd.Endpoint(m.Name); ok {
		before = e.DBSize
	}
	started := metav1.NewTime(r.now())
	if err := r.patchDefrag(ctx, m, func(d *stewardv1.MemberDefragmentation) {
		d.StartedAt, d.StartedTrigger, d.StartedSize = &started, a.DefragTrigger, quantity(before)
	}); err != nil {
		return err
	}
	t0 := time.Now()
	err := disruption.New(effects{r: r, o: o, ec: ec}).Do(ctx, o.facts.DisruptionView(), *a.Disruption)
	took := time.Since(t0)
	// The member serves again: back into the client Service now, not when the drain's hold ends
	// (three members defragmented within seconds were all out of it at once).
	if uerr := r.undrain(ctx, o.pods[m.Name]); uerr != nil && err == nil {
		err = uerr
	}
	if refusal := (*disruption.Refusal)(nil); errors.As(err, &refusal) {
		// Refused on the fresh read: nothing was asked of etcd, so the intent goes unrecorded.
		return errors.Join(err, r.patchDefrag(ctx, m, func(d *stewardv1.MemberDefragmentation) {
			d.StartedAt, d.StartedTrigger, d.StartedSize = nil, "", nil
		}))
	}
	res := stewardv1.DefragmentationResult{Time: metav1.NewTime(r.now()), Outcome: stewardv1.DefragmentationSucceeded,
		Trigger: a.DefragTrigger, SizeBefore: quantity(before), DurationMilliseconds: took.Milliseconds()}
	if ep, ok := o.endpoints[m.Name]; ok && o.client != nil {
		if s := o.client.Status(ctx, ep); s.Err == nil {
			res.SizeAfter = quantity(s.DBSize)
		}
	}
	if err != nil {
		res.Outcome, res.Message = stewardv1.DefragmentationFailed, err.Error()
	}
	if perr := r.patchDefrag(ctx, m, func(d *stewardv1.MemberDefragmentation) {
		d.StartedAt, d.StartedTrigger, d.StartedSize, d.Last = nil, "", nil, &res
		if err == nil {
			d.LastSucceeded, d.ConsecutiveFailures = &res.Time, 0
			if m := ec.Status.Maintenance; m != nil && m.LastCompaction != nil {
				d.AfterCompaction = m.LastCompaction.Revision
			}
		} else {
			d.ConsecutiveFailures++
		}
	}); perr != nil {
		return perr
	}
	if err != nil {
		r.memberEvent(ec, m.Name, corev1.EventTypeWarning, "DefragmentationFailed", "%s: defragmentation failed after %s: %v",
			m.Name, took.Round(time.Millisecond), err)
		return nil
	}
	r.memberEvent(ec, m.Name, corev1.EventTypeNormal, "Defragmented", "%s: %s -> %s in %s (%s)", m.Name, sizeText(res.SizeBefore),
		sizeText(res.SizeAfter), took.Round(time.Millisecond), a.DefragTrigger)
	return nil
}

// recordInterrupted closes a defragmentation whose end the operator did not see.
func (r *EtcdClusterReconciler) recordInterrupted(ctx context.Context, o *observed, m *stewardv1.EtcdMember) error {
	d := m.Status.Defragmentation
	if d == nil || d.StartedAt == nil {
		return nil
	}
	res := stewardv1.DefragmentationResult{Time: metav1.NewTime(r.now()), Outcome: stewardv1.DefragmentationInterrupted,
		Trigger: d.StartedTrigger, SizeBefore: d.StartedSize,
		Message: "the operator stopped while the defragmentation ran; etcd carries one on to its end regardless"}
	if e, ok := o.facts.Etcd.Endpoint(m.Name); ok && e.DBSize > 0 {
		res.SizeAfter = quantity(e.DBSize)
	}
	return r.patchDefrag(ctx, m, func(d *stewardv1.MemberDefragmentation) {
		d.StartedAt, d.StartedTrigger, d.StartedSize, d.Last = nil, "", nil, &res
	})
}

func (r *EtcdClusterReconciler) patchDefrag(ctx context.Context, m *stewardv1.EtcdMember, edit func(*stewardv1.MemberDefragmentation)) error {
	base := m.DeepCopy()
	if m.Status.Defragmentation == nil {
		m.Status.Defragmentation = &stewardv1.MemberDefragmentation{}
	}
	edit(m.Status.Defragmentation)
	return r.Client.Status().Patch(ctx, m, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

func quantity(n int64) *resource.Quantity {
	if n <= 0 {
		return nil
	}
	return resource.NewQuantity(n, resource.BinarySI)
}

func sizeText(q *resource.Quantity) string {
	if q == nil {
		return "?"
	}
	return fmt.Sprintf("%.1fMiB", float64(q.Value())/(1<<20))
}

// compact drops history to recover from NOSPACE, recording it in status (written with the rest
// of status at the end of the reconcile; a crash before that repeats a harmless compaction).
func (r *EtcdClusterReconciler) compact(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed, a plan.Action) error {
	if o.client == nil {
		return errors.New("no etcd client to compact")
	}
	if err := o.client.Compact(ctx, a.Revision); err != nil {
		return err
	}
	if ec.Status.Maintenance == nil {
		ec.Status.Maintenance = &stewardv1.MaintenanceStatus{}
	}
	ec.Status.Maintenance.LastCompaction = &stewardv1.CompactionRecord{Revision: a.Revision, HeadRevision: a.HeadRevision,
		Time: metav1.NewTime(r.now()), Reason: a.Message}
	return nil
}

// disarm disarms every alarm of the action's type (one per member that raised it).
func (r *EtcdClusterReconciler) disarm(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed, a plan.Action) error {
	if o.client == nil {
		return errors.New("no etcd client to disarm an alarm")
	}
	typ := cmp.Or(a.Alarm, health.AlarmNoSpace)
	for _, al := range o.facts.Etcd.Alarms {
		if al.Type == typ {
			if err := o.client.DisarmAlarm(ctx, al.MemberID, al.Type); err != nil {
				return err
			}
		}
	}
	if ec.Status.Maintenance == nil {
		ec.Status.Maintenance = &stewardv1.MaintenanceStatus{}
	}
	now := metav1.NewTime(r.now())
	ec.Status.Maintenance.LastDisarm = &now
	return nil
}
