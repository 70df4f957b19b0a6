package kubectletcd

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/backupplan"
)

// pointInTimeFlags are restore's point-in-time flags.
type pointInTimeFlags struct {
	schedule string
	revision int64
	at       string
}

func (p *pointInTimeFlags) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&p.schedule, "schedule", "", "the EtcdBackupSchedule (with spec.continuous) to restore a point in time from")
	cmd.Flags().Int64Var(&p.revision, "to-revision", 0, "with --schedule: restore the cluster as it was at this revision")
	cmd.Flags().StringVar(&p.at, "to-time", "", "with --schedule: restore the last revision stamped at or before this time (RFC 3339, e.g. 2026-12-04T14:02:10Z)")
}

func (p pointInTimeFlags) set() bool { return p.schedule != "" || p.revision != 0 || p.at != "" }

// spec checks the flags and builds spec.bootstrap.restore.pointInTime.
func (p pointInTimeFlags) spec() (*stewardv1.PointInTimeSpec, error) {
	switch {
	case p.schedule == "":
		return nil, fmt.Errorf("--to-revision and --to-time need --schedule")
	case (p.revision != 0) == (p.at != ""):
		return nil, fmt.Errorf("give exactly one of --to-revision and --to-time")
	case p.revision < 0:
		return nil, fmt.Errorf("--to-revision must be positive")
	case p.revision > 0:
		r := p.revision
		return &stewardv1.PointInTimeSpec{ScheduleName: p.schedule, Revision: &r}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, p.at)
	if err != nil {
		return nil, fmt.Errorf("--to-time %q: want RFC 3339 (2026-12-04T14:02:10Z)", p.at)
	}
	return &stewardv1.PointInTimeSpec{ScheduleName: p.schedule, Time: &metav1.Time{Time: t}}, nil
}

// restoreToPoint shows what will be restored (the ranges, the base the target starts from) and
// creates the cluster, or refuses a target outside the ranges.
func restoreToPoint(cmd *cobra.Command, env *Env, p pointInTimeFlags, into string, dryRun bool) error {
	spec, err := p.spec()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	var s stewardv1.EtcdBackupSchedule
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: env.Namespace, Name: p.schedule}, &s); err != nil {
		return apiError(err, "get", "etcdbackupschedules", env.Namespace, p.schedule)
	}
	c := s.Status.Continuous
	if s.Spec.Continuous == nil && c == nil {
		return fmt.Errorf("etcdbackupschedule %q has no continuous backup (spec.continuous): restore one of its backups by name instead", s.Name)
	}
	if c == nil || len(c.Restorable) == 0 {
		return fmt.Errorf("etcdbackupschedule %q reports no restorable range yet (its streamer waits for a first backup, or has not reported)", s.Name)
	}
	_, _ = fmt.Fprintf(env.Out, "Restorable from schedule %s (cluster %s):\n", s.Name, s.Spec.Template.ClusterName)
	for _, rg := range c.Restorable {
		_, _ = fmt.Fprintf(env.Out, "  %s\n", backupplan.RangeText(rg))
	}
	if hold := backupplan.PointInTimeHold(c, spec); hold != "" {
		return fmt.Errorf("%s", hold)
	}
	target := ""
	if spec.Revision != nil {
		target = fmt.Sprintf("revision %d", *spec.Revision)
	} else {
		target = spec.Time.UTC().Format(time.RFC3339Nano) + " (the last revision stamped at or before it; status.restore names it)"
	}
	_, _ = fmt.Fprintf(env.Out, "Will restore %s: the newest backup at or before it, then every revision after it up to the target.\n", target)

	src := &stewardv1.EtcdCluster{}
	err = env.Client.Get(ctx, types.NamespacedName{Namespace: env.Namespace, Name: s.Spec.Template.ClusterName}, src)
	if err != nil && !apierrors.IsNotFound(err) {
		return apiError(err, "get", "etcdclusters", env.Namespace, s.Spec.Template.ClusterName)
	}
	ec := RestoreCluster(&stewardv1.EtcdBackup{}, src, err == nil, env.Namespace, into)
	ec.Spec.Bootstrap = &stewardv1.BootstrapSpec{Restore: &stewardv1.RestoreSpec{PointInTime: spec}}
	if err != nil && ec.Spec.Version == "" && !dryRun {
		return fmt.Errorf("cluster %q no longer exists: give its etcd version by creating the EtcdCluster yourself (--dry-run prints one)", s.Spec.Template.ClusterName)
	}
	if dryRun {
		return printObject(env.Out, "yaml", ec)
	}
	if err := createRestored(ctx, env, ec); err != nil {
		return err
	}
	_, err = fmt.Fprintf(env.Out, "etcdcluster %q created; follow it with: kubectl etcd status %s\n", into, into)
	return err
}
