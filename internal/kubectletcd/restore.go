package kubectletcd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func newRestoreCommand(get envFunc) *cobra.Command {
	var into string
	var dryRun bool
	var pit pointInTimeFlags
	cmd := &cobra.Command{
		Use:   "restore (BACKUP | --schedule S --to-revision R | --schedule S --to-time T) --into NEW",
		Short: "Create a new EtcdCluster bootstrapped from a Succeeded EtcdBackup, or from a point in time (spec.bootstrap.restore)",
		Long: `restore creates EtcdCluster NEW with spec.bootstrap.restore.backupName set to BACKUP. Its spec is
copied from the cluster the backup was taken of when it still exists (without paused, rotateCA and
approveDropOldCA), else replicas 3 and the backup's etcd version. The existing cluster is not
touched; the new one gets a new cluster ID and revisions bumped past the backup's (docs/backup.md).

With --schedule and --to-revision or --to-time it restores the cluster as it was at that revision or
moment from the schedule's backups and continuous backup (spec.bootstrap.restore.pointInTime). It
first prints the restorable ranges and the one the target falls in, and refuses a target outside them.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if into == "" {
				return fmt.Errorf("--into NEW is required: restore always creates a new cluster")
			}
			env, err := get(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if pit.set() {
				if len(args) > 0 {
					return fmt.Errorf("give a BACKUP or --schedule with a target, not both")
				}
				return restoreToPoint(cmd, env, pit, into, dryRun)
			}
			if len(args) == 0 {
				return fmt.Errorf("give a BACKUP, or --schedule with --to-revision or --to-time")
			}
			var b stewardv1.EtcdBackup
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: env.Namespace, Name: args[0]}, &b); err != nil {
				return apiError(err, "get", "etcdbackups", env.Namespace, args[0])
			}
			if b.Status.Phase != stewardv1.BackupSucceeded {
				return fmt.Errorf("etcdbackup %q is %s, not Succeeded: only a finished backup can seed a cluster", b.Name,
					or(string(b.Status.Phase), "Pending"))
			}
			src := &stewardv1.EtcdCluster{}
			err = env.Client.Get(ctx, types.NamespacedName{Namespace: env.Namespace, Name: b.Spec.ClusterName}, src)
			if err != nil && !apierrors.IsNotFound(err) {
				return apiError(err, "get", "etcdclusters", env.Namespace, b.Spec.ClusterName)
			}
			ec := RestoreCluster(&b, src, err == nil, env.Namespace, into)
			if dryRun {
				return printObject(env.Out, "yaml", ec)
			}
			if err := createRestored(ctx, env, ec); err != nil {
				return err
			}
			_, err = fmt.Fprintf(env.Out, "etcdcluster %q created from etcdbackup %q (revision %d); follow it with: kubectl etcd status %s\n",
				into, b.Name, b.Status.Revision, into)
			return err
		},
	}
	cmd.Flags().StringVar(&into, "into", "", "name of the new EtcdCluster")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the EtcdCluster instead of creating it")
	pit.bind(cmd)
	return cmd
}

// createRestored creates the new cluster; restore never touches one that exists.
func createRestored(ctx context.Context, env *Env, ec *stewardv1.EtcdCluster) error {
	if err := env.Client.Create(ctx, ec); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("etcdcluster %q already exists in namespace %q: restore only creates new clusters", ec.Name, env.Namespace)
		}
		return apiError(err, "create", "etcdclusters", env.Namespace, "")
	}
	return nil
}

// RestoreCluster is the new cluster restore creates. Fields that name one cluster's life (a
// pending CA rotation, an approval, paused) are dropped: they mean nothing to the new one.
func RestoreCluster(b *stewardv1.EtcdBackup, src *stewardv1.EtcdCluster, srcExists bool, ns, name string) *stewardv1.EtcdCluster {
	ec := &stewardv1.EtcdCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: stewardv1.GroupVersion.String(), Kind: "EtcdCluster"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
	}
	if srcExists {
		ec.Spec = *src.Spec.DeepCopy()
		ec.Spec.Paused = false
		if t := ec.Spec.TLS; t != nil {
			t.RotateCA, t.ApproveDropOldCA = "", ""
		}
	} else {
		ec.Spec.Version = strings.TrimPrefix(b.Status.EtcdVersion, "v")
	}
	ec.Spec.Bootstrap = &stewardv1.BootstrapSpec{Restore: &stewardv1.RestoreSpec{BackupName: b.Name}}
	return ec
}

func newRecoverQuorumCommand(get envFunc) *cobra.Command {
	var dryRun, confirmGone bool
	var survivor string
	cmd := &cobra.Command{
		Use:   "recover-quorum CLUSTER --dry-run",
		Short: "Show (or, without --dry-run, request) the operator's quorum recovery plan",
		Long: `recover-quorum prints status.quorumRecovery: the survivor the operator would restart alone with
--force-new-cluster, the members it would discard (their PVCs kept) and what would be lost. Without
--dry-run it sets the annotation etcd.steward.dev/recover-quorum (auto, or --survivor MEMBER) and the
operator runs the recovery (docs/operations.md); it refuses while quorum holds. When the operator
cannot reach enough members to prove quorum lost, the operator runs no recovery unless you confirm
that the members it cannot reach are gone for good: --confirm-unreachable-gone adds
etcd.steward.dev/recover-quorum-confirm with the cluster's ID.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := get(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			s, ec, err := loadStatus(ctx, env, args[0])
			if err != nil {
				return err
			}
			if !s.QuorumLost && !(s.MembersUnreachable && s.Available != "True") && (s.Quorum == nil || s.Quorum.InProgress == nil) {
				_, err := fmt.Fprintf(env.Out, "etcdcluster %q has quorum (Available=%s): there is nothing to recover\n", ec.Name, s.Available)
				return err
			}
			line := func(k, format string, a ...any) {
				_, _ = fmt.Fprintf(env.Out, "%s: "+format+"\n", append([]any{k}, a...)...)
			}
			quorumLines(line, s.Quorum, env.Now())
			if dryRun {
				_, _ = fmt.Fprintf(env.Out, "dry run: nothing changed; run without --dry-run to ask the operator for this recovery\n")
				return nil
			}
			if p := s.Quorum.Plan; survivor == "" && (p == nil || p.Refused != "") {
				return fmt.Errorf("the operator's plan is refused; nothing requested")
			}
			value := or(survivor, "auto")
			annotations := map[string]string{stewardv1.AnnotationRecoverQuorum: value}
			if s.MembersUnreachable {
				if !confirmGone {
					return fmt.Errorf("the operator cannot reach enough members to know whether etcd lost quorum, and runs no " +
						"recovery on silence; if the members it cannot reach are gone for good, run again with --confirm-unreachable-gone")
				}
				annotations[stewardv1.AnnotationRecoverQuorumConfirm] = ec.Status.ClusterID
			}
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
			if err := env.Client.Patch(ctx, ec, client.RawPatch(types.MergePatchType, patch)); err != nil {
				return apiError(err, "patch", "etcdclusters", env.Namespace, ec.Name)
			}
			_, err = fmt.Fprintf(env.Out, "requested: %s=%s; follow it with kubectl etcd status %s\n", stewardv1.AnnotationRecoverQuorum, value, ec.Name)
			return err
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only show what the recovery would do")
	cmd.Flags().StringVar(&survivor, "survivor", "", "insist on this member instead of the plan's survivor")
	cmd.Flags().BoolVar(&confirmGone, "confirm-unreachable-gone", false,
		"confirm that the members the operator cannot reach are gone for good (needed when etcd's evidence is incomplete)")
	return cmd
}
