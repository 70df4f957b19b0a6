package kubectletcd

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func newBackupCommand(get envFunc) *cobra.Command {
	var like, name string
	var verify, wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "backup CLUSTER",
		Short: "Take a backup now: creates an EtcdBackup like the cluster's schedule or latest backup",
		Long: `backup creates an EtcdBackup; the operator runs it. Its destination is copied from --like (an
EtcdBackup or EtcdBackupSchedule of the namespace), else from a schedule targeting the cluster, else
from the cluster's newest EtcdBackup. --wait follows it to Succeeded or Failed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := get(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			ec, err := getCluster(ctx, env, args[0])
			if err != nil {
				return err
			}
			if err := requireQuorum(ec); err != nil {
				return err // the operator would fail the backup at once; say why here
			}
			spec, from, err := backupTemplate(ctx, env, ec.Name, like)
			if err != nil {
				return err
			}
			spec.Verify = spec.Verify || verify
			b := &stewardv1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace}, Spec: spec}
			if name != "" {
				b.Name = name
			} else {
				b.GenerateName = ec.Name + "-manual-"
			}
			if err := env.Client.Create(ctx, b); err != nil {
				return apiError(err, "create", "etcdbackups", env.Namespace, "")
			}
			_, _ = fmt.Fprintf(env.Out, "etcdbackup %q created (destination from %s)\n", b.Name, from)
			if !wait {
				return nil
			}
			return waitBackup(ctx, env, b.Name, timeout)
		},
	}
	cmd.Flags().StringVar(&like, "like", "", "copy the destination from this EtcdBackup or EtcdBackupSchedule")
	cmd.Flags().StringVar(&name, "name", "", "name of the EtcdBackup (default: <cluster>-manual-<random>)")
	cmd.Flags().BoolVar(&verify, "verify", false, "run the restore drill after the snapshot")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the backup succeeded or failed")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long --wait waits")
	return cmd
}

// backupTemplate finds a destination the user already configured: the plugin never invents a
// bucket or asks for credentials.
func backupTemplate(ctx context.Context, env *Env, cluster, like string) (stewardv1.EtcdBackupSpec, string, error) {
	if like != "" {
		var b stewardv1.EtcdBackup
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: env.Namespace, Name: like}, &b)
		if err == nil {
			return stewardv1.EtcdBackupSpec{ClusterName: cluster, Destination: b.Spec.Destination, Compression: b.Spec.Compression,
				DeletionPolicy: b.Spec.DeletionPolicy, Verify: b.Spec.Verify}, "etcdbackup " + like, nil
		}
		var s stewardv1.EtcdBackupSchedule
		if err2 := env.Client.Get(ctx, types.NamespacedName{Namespace: env.Namespace, Name: like}, &s); err2 != nil {
			return stewardv1.EtcdBackupSpec{}, "", fmt.Errorf("--like %q: neither an etcdbackup (%w) nor an etcdbackupschedule (%w)",
				like, apiError(err, "get", "etcdbackups", env.Namespace, like), apiError(err2, "get", "etcdbackupschedules", env.Namespace, like))
		}
		t := s.Spec.Template
		t.ClusterName, t.Verify = cluster, t.Verify || s.Spec.Verify
		return t, "etcdbackupschedule " + like, nil
	}
	var schedules stewardv1.EtcdBackupScheduleList
	if err := env.Client.List(ctx, &schedules, client.InNamespace(env.Namespace)); err != nil {
		return stewardv1.EtcdBackupSpec{}, "", apiError(err, "list", "etcdbackupschedules", env.Namespace, "")
	}
	slices.SortFunc(schedules.Items, func(a, b stewardv1.EtcdBackupSchedule) int { return cmp.Compare(a.Name, b.Name) })
	for _, s := range schedules.Items {
		if s.Spec.Template.ClusterName == cluster {
			t := s.Spec.Template
			t.Verify = t.Verify || s.Spec.Verify
			return t, "etcdbackupschedule " + s.Name, nil
		}
	}
	backups, err := listBackups(ctx, env, cluster)
	if err != nil {
		return stewardv1.EtcdBackupSpec{}, "", err
	}
	slices.SortFunc(backups, func(a, b stewardv1.EtcdBackup) int {
		return cmp.Or(b.CreationTimestamp.Compare(a.CreationTimestamp.Time), cmp.Compare(b.Name, a.Name))
	})
	if len(backups) > 0 {
		b := backups[0]
		return stewardv1.EtcdBackupSpec{ClusterName: cluster, Destination: b.Spec.Destination, Compression: b.Spec.Compression,
			DeletionPolicy: b.Spec.DeletionPolicy, Verify: b.Spec.Verify}, "etcdbackup " + b.Name, nil
	}
	return stewardv1.EtcdBackupSpec{}, "", fmt.Errorf("no backup destination known for etcdcluster %q in namespace %q: "+
		"create an EtcdBackup or EtcdBackupSchedule for it once (docs/backup.md), or pass --like", cluster, env.Namespace)
}

func waitBackup(ctx context.Context, env *Env, name string, timeout time.Duration) error {
	var last stewardv1.BackupPhase
	return poll(ctx, timeout, 2*time.Second, func(ctx context.Context) (bool, error) {
		var b stewardv1.EtcdBackup
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: env.Namespace, Name: name}, &b); err != nil {
			return false, apiError(err, "get", "etcdbackups", env.Namespace, name)
		}
		if b.Status.Phase != last {
			last = b.Status.Phase
			_, _ = fmt.Fprintf(env.Out, "%s: %s %s\n", name, or(string(last), "Pending"), b.Status.Message)
		}
		switch b.Status.Phase {
		case stewardv1.BackupSucceeded:
			_, _ = fmt.Fprintf(env.Out, "revision %d, %s, %s\n", b.Status.Revision, size(b.Status.Size), b.Status.Location)
			return true, nil
		case stewardv1.BackupFailed:
			return false, fmt.Errorf("etcdbackup %q failed: %s", name, b.Status.Message)
		}
		return false, nil
	})
}
