package kubectletcd

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// annotationDefrag records, on the cluster, the schedule a `kubectl etcd defrag` replaced and the
// slot it asked for, so an interrupted run is put right by the next one.
const annotationDefrag = "etcd.steward.dev/kubectl-etcd-defrag"

type defragRecord struct {
	Previous string    `json:"previous"`
	Schedule string    `json:"schedule"`
	Slot     time.Time `json:"slot"`
}

func newDefragCommand(get envFunc) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "defrag CLUSTER",
		Short: "Defragment every member now, through the operator (followers first, the leader last)",
		Long: `Steward has no on-demand defragmentation trigger, but it has a schedule
(spec.maintenance.defragmentation.schedule) and defragments every member the schedule fired for, one
at a time, through its disruption chokepoint and recovery gate, the leader last after a leadership
handoff. defrag sets a one-off schedule for the current minute, waits until every voter was
defragmented since, and puts the previous schedule back (it records the previous value in the
annotation ` + annotationDefrag + ` first, so an interrupted run is undone by the next one).
A single member can not be picked: the schedule covers every member.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := get(cmd)
			if err != nil {
				return err
			}
			return defrag(cmd.Context(), env, args[0], timeout)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for every member")
	return cmd
}

func defrag(ctx context.Context, env *Env, name string, timeout time.Duration) error {
	ec, err := getCluster(ctx, env, name)
	if err != nil {
		return err
	}
	if err := requireQuorum(ec); err != nil {
		return err
	}
	if !ec.Spec.DefragmentationEnabled() {
		return fmt.Errorf("etcdcluster %q has spec.maintenance.defragmentation.enabled false: Steward defragments nothing", name)
	}
	if r := ec.Spec.Replicas; r != nil && *r == 1 && !ec.Spec.UpdateStrategy.AllowDowntime {
		return fmt.Errorf("etcdcluster %q has one member: Steward defragments it only with spec.updateStrategy.allowDowntime (it serves nothing meanwhile)", name)
	}
	if err := onConflict(ctx, env, name, func(ec *stewardv1.EtcdCluster) error { return restoreSchedule(ctx, env, ec) }); err != nil {
		return err
	}
	slot := env.Now().UTC().Truncate(time.Minute)
	rec := defragRecord{Schedule: oneOff(slot), Slot: slot}
	if err := onConflict(ctx, env, name, func(ec *stewardv1.EtcdCluster) error {
		rec.Previous = currentSchedule(ec)
		return patchSchedule(ctx, env, ec, rec.Schedule, &rec)
	}); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(env.Out, "asked Steward to defragment every member of %q (one-off schedule %q)\n", name, rec.Schedule)
	waitErr := waitDefragmented(ctx, env, name, slot, timeout)
	// Put the schedule back even when the wait failed or was interrupted.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err = onConflict(rctx, env, name, func(ec *stewardv1.EtcdCluster) error { return restoreSchedule(rctx, env, ec) })
	if waitErr == nil {
		waitErr = err
	}
	return waitErr
}

// onConflict reads the cluster and calls patch, again on a conflict: the operator writes the
// cluster's status every few seconds, and each write moves the resourceVersion the patch is
// guarded by.
func onConflict(ctx context.Context, env *Env, name string, patch func(*stewardv1.EtcdCluster) error) error {
	for i := 0; ; i++ {
		ec, err := getCluster(ctx, env, name)
		if err != nil {
			return err
		}
		err = patch(ec)
		if !apierrors.IsConflict(err) || i == 9 {
			return err
		}
	}
}

// oneOff is a cron expression that fires once, at slot (and again a year later, were it left).
func oneOff(slot time.Time) string {
	return fmt.Sprintf("%d %d %d %d *", slot.Minute(), slot.Hour(), slot.Day(), int(slot.Month()))
}

func currentSchedule(ec *stewardv1.EtcdCluster) string {
	if ec.Spec.Maintenance == nil {
		return ""
	}
	return ec.Spec.Maintenance.Defragmentation.Schedule
}

// patchSchedule sets the schedule (nil value: removes it) and the record annotation (nil:
// removes it) in one merge patch, guarded by resourceVersion: a concurrent edit of the cluster
// fails the patch rather than being overwritten.
func patchSchedule(ctx context.Context, env *Env, ec *stewardv1.EtcdCluster, schedule string, rec *defragRecord) error {
	var sched, ann any
	if schedule != "" {
		sched = schedule
	}
	if rec != nil {
		b, _ := json.Marshal(rec)
		ann = string(b)
	}
	patch, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": ec.ResourceVersion, "annotations": map[string]any{annotationDefrag: ann}},
		"spec":     map[string]any{"maintenance": map[string]any{"defragmentation": map[string]any{"schedule": sched}}},
	})
	if err := env.Client.Patch(ctx, ec, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return apiError(err, "patch", "etcdclusters", env.Namespace, ec.Name)
	}
	return nil
}

// restoreSchedule undoes a previous run's schedule if it is still in place; a schedule the user
// changed since is theirs and stays.
func restoreSchedule(ctx context.Context, env *Env, ec *stewardv1.EtcdCluster) error {
	raw, ok := ec.Annotations[annotationDefrag]
	if !ok {
		return nil
	}
	var rec defragRecord
	if err := json.Unmarshal([]byte(raw), &rec); err != nil || currentSchedule(ec) != rec.Schedule {
		return patchAnnotationOnly(ctx, env, ec)
	}
	if err := patchSchedule(ctx, env, ec, rec.Previous, nil); err != nil {
		return fmt.Errorf("putting spec.maintenance.defragmentation.schedule back to %q: %w", rec.Previous, err)
	}
	return nil
}

func patchAnnotationOnly(ctx context.Context, env *Env, ec *stewardv1.EtcdCluster) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, annotationDefrag)
	return apiError(env.Client.Patch(ctx, ec, client.RawPatch(types.MergePatchType, []byte(patch))),
		"patch", "etcdclusters", env.Namespace, ec.Name)
}

// waitDefragmented waits until every voter's latest defragmentation ended after slot.
func waitDefragmented(ctx context.Context, env *Env, name string, slot time.Time, timeout time.Duration) error {
	reported := map[string]bool{}
	return poll(ctx, timeout, 2*time.Second, func(ctx context.Context) (bool, error) {
		members, err := listMembers(ctx, env, name)
		if err != nil {
			return false, err
		}
		done, voters := 0, 0
		for _, m := range members {
			if m.Status.Role == stewardv1.RoleLearner || m.Status.Phase != stewardv1.MemberRunning {
				continue
			}
			voters++
			d := m.Status.Defragmentation
			if d == nil || d.Last == nil || d.Last.Time.Time.Before(slot) {
				continue
			}
			done++
			if !reported[m.Name] {
				reported[m.Name] = true
				l := d.Last
				_, _ = fmt.Fprintf(env.Out, "%s: %s, %s -> %s in %dms\n", m.Name, l.Outcome, qty(l.SizeBefore), qty(l.SizeAfter), l.DurationMilliseconds)
			}
		}
		return voters > 0 && done == voters, nil
	})
}

func qty(q *resource.Quantity) string {
	if q == nil {
		return "?"
	}
	return size(q.Value())
}
