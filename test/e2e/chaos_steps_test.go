//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
	"github.com/etcd-steward/steward/test/e2e/framework"
	"github.com/etcd-steward/steward/test/e2e/framework/chaos"
)

// convergeWithin bounds each step: from the operation to settled once its faults are lifted.
const convergeWithin = 6 * time.Minute

// runStep starts the operation, injects the fault when the step says, lifts it, and waits for the
// cluster to converge on the spec.
func (c *campaign) runStep(s chaos.Step) chaos.StepRecord {
	rec := chaos.StepRecord{Step: s, Started: time.Now()}
	done, err := c.startOp(s)
	if err != nil {
		rec.Error = fmt.Sprintf("%s: %v", s.Op, err)
		return rec
	}
	time.Sleep(s.FaultAfter)
	rec.Injected, rec.Note = c.inject(s)
	// The operation's own condition first: it may act while the cluster is not settled yet (a CA
	// rotation's approval).
	err = framework.Poll(context.Background(), convergeWithin, func(ctx context.Context) (bool, error) {
		if ok, err := done(ctx); !ok {
			return false, err
		}
		return settled(c.ns, c.name, s.Replicas)(ctx)
	})
	rec.Converged = time.Since(rec.Started).Seconds()
	if s.Op == chaos.OpBackup {
		var b stewardv1.EtcdBackup
		if err := f.Client.Get(context.Background(), client.ObjectKey{Namespace: c.ns, Name: fmt.Sprintf("chaos-%d", s.N)}, &b); err == nil {
			rec.Note = strings.TrimSpace(fmt.Sprintf("%s; backup %s %s", rec.Note, b.Status.Phase, b.Status.Message))
		}
	}
	if err != nil {
		rec.Error = "not converged: " + err.Error()
		c.violate(chaos.InvConverges, fmt.Sprintf("step %d (%s) not converged within %s: %v", s.N, s, convergeWithin, err))
		f.Dump(c.t, c.ns)
	}
	return rec
}

func nothingMore(context.Context) (bool, error) { return true, nil }

// startOp changes the spec (or asks for work) and returns what, beyond settled, ends the operation.
func (c *campaign) startOp(s chaos.Step) (framework.Condition, error) {
	c.spec.Lock()
	defer c.spec.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch s.Op {
	case chaos.OpRoll:
		update(c.t, c.ns, c.name, func(ec *stewardv1.EtcdCluster) { ec.Spec.Options.SnapshotCount = ptr.To(s.Value) })
		want := fmt.Sprintf("--snapshot-count=%d", s.Value)
		return func(ctx context.Context) (bool, error) {
			pods, err := f.Pods(ctx, c.ns, map[string]string{stewardv1.LabelCluster: c.name})
			if err != nil {
				return false, err
			}
			if stale := podsWithout(pods, want); len(stale) > 0 {
				return false, fmt.Errorf("%v run without %s", stale, want)
			}
			return true, nil
		}, nil
	case chaos.OpScale:
		update(c.t, c.ns, c.name, func(ec *stewardv1.EtcdCluster) { ec.Spec.Replicas = ptr.To(s.Replicas) })
		c.replicas.Store(s.Replicas)
	case chaos.OpRotateCA:
		v := fmt.Sprintf("chaos-%d", s.N)
		update(c.t, c.ns, c.name, func(ec *stewardv1.EtcdCluster) { ec.Spec.TLS.RotateCA = v })
		// The traffic's client reloads its Secret: once it has, the old CA is dropped on approval,
		// as its user would, not after spec.tls.dropOldCAAfter (TestCARotation/Memory waits that out).
		traffic := clientTLSFor(c.t, c.ns, c.name)
		return func(ctx context.Context) (bool, error) {
			if _, err := approveDropOnceReloaded(ctx, c.ns, c.name, traffic); err != nil {
				return false, err
			}
			ec, err := get(ctx, c.ns, c.name)
			if err != nil || ec.Status.TLS == nil {
				return false, err
			}
			return ec.Status.TLS.RotateCA == v && ec.Status.TLS.Rotation == "", fmt.Errorf("rotateCA %q, pass %q", ec.Status.TLS.RotateCA, ec.Status.TLS.Rotation)
		}, nil
	case chaos.OpDefragment:
		asked := time.Now().UTC().Truncate(time.Second)
		ec := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: c.name}}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, stewardv1.AnnotationDefragmentRequested, asked.Format(time.RFC3339))
		if err := f.MergePatch(ctx, ec, patch); err != nil {
			return nil, err
		}
		return c.defragmentedSince(asked), nil
	case chaos.OpBackup:
		dest, _ := s3Storage(c.t, c.ns)
		name := fmt.Sprintf("chaos-%d", s.N)
		if err := f.Client.Create(ctx, newBackup(c.ns, name, c.name, dest)); err != nil {
			return nil, err
		}
		return func(ctx context.Context) (bool, error) {
			var b stewardv1.EtcdBackup
			if err := f.Client.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: name}, &b); err != nil {
				return false, err
			}
			done := b.Status.Phase == stewardv1.BackupSucceeded || b.Status.Phase == stewardv1.BackupFailed
			return done, fmt.Errorf("backup %s: phase %q %s", name, b.Status.Phase, b.Status.Message)
		}, nil
	}
	return nothingMore, nil
}

// defragmentedSince: every running voter ended a defragmentation after the request, or joined after it.
func (c *campaign) defragmentedSince(asked time.Time) framework.Condition {
	return func(ctx context.Context) (bool, error) {
		var members stewardv1.EtcdMemberList
		if err := f.Client.List(ctx, &members, client.InNamespace(c.ns), client.MatchingLabels{stewardv1.LabelCluster: c.name}); err != nil {
			return false, err
		}
		for _, m := range members.Items {
			if m.Status.Role == stewardv1.RoleLearner || m.Status.Phase != stewardv1.MemberRunning || !m.CreationTimestamp.Time.Before(asked) {
				continue
			}
			if d := m.Status.Defragmentation; d == nil || d.Last == nil || d.Last.Time.Time.Before(asked) {
				return false, fmt.Errorf("%s not defragmented since %s", m.Name, asked.Format(time.RFC3339))
			}
		}
		return true, nil
	}
}

// inject carries out the step's fault and lifts it; it says whether the fault happened.
func (c *campaign) inject(s chaos.Step) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	member := resources.MemberName(c.name, s.Member)
	var pod corev1.Pod
	if s.Fault.MemberFault() {
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: member}, &pod); err != nil {
			return false, fmt.Sprintf("no Pod %s: %v", member, err)
		}
	}
	window := func(from time.Time) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.windows = append(c.windows, chaos.Window{Member: member, Fault: s.Fault, From: from, To: time.Now()})
	}
	from := time.Now()
	switch s.Fault {
	case chaos.FaultNone:
		return false, ""
	case chaos.FaultKillOperator:
		killOperator(c.t)
		return true, "operator Pods deleted with no grace"
	case chaos.FaultFailpoint:
		return c.failpoint(ctx, s)
	case chaos.FaultPartitionOperator:
		op, err := operatorPod(ctx)
		if err != nil {
			return false, err.Error()
		}
		// Every other injection cuts the operator from a majority only (the highest ordinals), so
		// the member it still reaches answers with a leader; the rest from every member. Chosen by
		// step number, not the seed's random stream, so each seed's sequence stays as it was.
		pods := memberPods(c.t, c.ns, c.name)
		names := slices.Sorted(maps.Keys(pods))
		if s.N%2 == 1 && len(names) > 2 {
			names = names[len(names)-(len(names)/2+1):]
		}
		var ips []string
		for _, n := range names {
			if ip := pods[n].Status.PodIP; ip != "" {
				ips = append(ips, ip)
			}
		}
		cut, err := partitionFrom(op, "manager", ips)
		if err != nil {
			return false, err.Error()
		}
		time.Sleep(s.FaultFor)
		cut.heal()
		return true, fmt.Sprintf("operator cut off %v", ips)
	case chaos.FaultDeletePod:
		err := f.Client.Delete(ctx, &pod, client.GracePeriodSeconds(0))
		window(from)
		return err == nil, errNote(err)
	case chaos.FaultKillEtcd:
		err := signalEtcd(&pod, syscall.SIGKILL)
		window(from)
		return err == nil, errNote(err)
	case chaos.FaultPartitionMember:
		cut, err := partitionPod(&pod, "etcd")
		if err != nil {
			window(from)
			return false, err.Error()
		}
		time.Sleep(s.FaultFor)
		cut.heal()
		window(from)
		return true, ""
	case chaos.FaultStallDisk:
		err := signalEtcd(&pod, syscall.SIGSTOP)
		if err == nil {
			time.Sleep(s.FaultFor)
			_ = signalEtcd(&pod, syscall.SIGCONT) // gone already if the kubelet or Steward replaced it
		}
		window(from)
		return err == nil, errNote(err)
	case chaos.FaultRestartAPIServer:
		err := restartAPIServer(min(s.FaultFor, 5*time.Second))
		return err == nil, errNote(err)
	}
	return false, "unknown fault " + string(s.Fault)
}

func errNote(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// failpoint arms the point on the cluster, waits for the operator to log that it stopped there,
// kills it (SIGKILL: the Pod deleted with no grace) and disarms. A point not reached in time
// injects nothing.
func (c *campaign) failpoint(ctx context.Context, s chaos.Step) (bool, string) {
	hit, err := stopAtFailpoint(ctx, c.ns, c.name, s.Failpoint, s.FaultFor+20*time.Second, nil)
	switch {
	case err != nil:
		return hit, err.Error()
	case !hit:
		return false, "not reached"
	}
	return true, "operator stopped at " + s.Failpoint + ", then killed"
}

// podsWithout names the live Pods whose etcd container's command line lacks arg.
func podsWithout(pods []*corev1.Pod, arg string) []string {
	var out []string
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, ctr := range p.Spec.Containers {
			if ctr.Name == "etcd" && !strings.Contains(strings.Join(append(ctr.Command, ctr.Args...), " "), arg) {
				out = append(out, p.Name)
			}
		}
	}
	return out
}
