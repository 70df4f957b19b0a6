package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/plan"
	"github.com/etcd-steward/steward/internal/versionguard"
)

// downgrade carries out a Downgrade action (plan/downgrade.go): it moves status.downgrade to the
// action's stage, asking etcd for what the stage needs. The status write is the reconcile's, made
// with an optimistic lock (intentOnly), so a stage is recorded only onto the object it was decided
// from; every etcd call here is safe to repeat.
func (r *EtcdClusterReconciler) downgrade(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed, a plan.Action) error {
	now := metav1.NewTime(r.now())
	d := ec.Status.Downgrade
	if d == nil && a.DowngradeStage != stewardv1.DowngradeEnabling {
		return fmt.Errorf("downgrade stage %s with no status.downgrade recorded", a.DowngradeStage)
	}
	switch a.DowngradeStage {
	case stewardv1.DowngradeEnabling:
		d = &stewardv1.DowngradeStatus{From: a.DowngradeFrom, Target: ec.Spec.Version, StartedAt: now}
		name, err := r.backupBeforeDowngrade(ctx, ec, d)
		if err != nil {
			return err
		}
		d.Backup = name
	case stewardv1.DowngradeEnabled:
		if o.client == nil {
			return errors.New("no etcd client to enable the downgrade")
		}
		minor := versionguard.Minor(d.Target)
		if !reportsDowngrade(o, minor) {
			if _, err := o.client.Downgrade(ctx, clientv3.DowngradeValidate, minor); err != nil {
				return fmt.Errorf("etcd refused to validate the downgrade to %s: %w", minor, err)
			}
			if _, err := o.client.Downgrade(ctx, clientv3.DowngradeEnable, minor); err != nil && !reportsDowngrade(o, minor) {
				return fmt.Errorf("etcd refused to enable the downgrade to %s: %w", minor, err)
			}
		}
	case stewardv1.DowngradeCancelling:
		if o.client == nil {
			return errors.New("no etcd client to cancel the downgrade")
		}
		// etcd answers a cancel with no downgrade in flight with success (it only logs it).
		if _, err := o.client.Downgrade(ctx, clientv3.DowngradeCancel, ""); err != nil &&
			!strings.Contains(err.Error(), "no inflight downgrade job") {
			return fmt.Errorf("etcd refused to cancel the downgrade: %w", err)
		}
	case stewardv1.DowngradeCompleted, stewardv1.DowngradeCancelled:
		d.FinishedAt = &now
	}
	d.Stage, d.Message = a.DowngradeStage, a.Message
	ec.Status.Downgrade = d
	return nil
}

// reportsDowngrade: a member reports etcd's downgrade to minor enabled already (the enable of an
// earlier reconcile whose status write was lost).
func reportsDowngrade(o *observed, minor string) bool {
	for _, e := range o.facts.Etcd.Endpoints {
		if e.Reachable && e.DowngradeEnabled && versionguard.Minor(e.DowngradeTarget) == minor {
			return true
		}
	}
	return false
}

// backupBeforeDowngrade takes a backup before etcd's downgrade is enabled, into the destination of
// the first (by name) schedule that backs this cluster up; "" when none does. The backup is named
// after the downgrade and kept like any other (it is not owned by the cluster).
func (r *EtcdClusterReconciler) backupBeforeDowngrade(ctx context.Context, ec *stewardv1.EtcdCluster, d *stewardv1.DowngradeStatus) (string, error) {
	var list stewardv1.EtcdBackupScheduleList
	if err := r.Client.List(ctx, &list, client.InNamespace(ec.Namespace)); err != nil {
		return "", err
	}
	var schedules []stewardv1.EtcdBackupSchedule
	for _, s := range list.Items {
		if s.Spec.Template.ClusterName == ec.Name && s.DeletionTimestamp == nil {
			schedules = append(schedules, s)
		}
	}
	if len(schedules) == 0 {
		return "", nil
	}
	slices.SortFunc(schedules, func(a, b stewardv1.EtcdBackupSchedule) int { return strings.Compare(a.Name, b.Name) })
	name := fmt.Sprintf("%s-before-downgrade-%s-%d", ec.Name, strings.ReplaceAll(versionguard.Minor(d.Target), ".", "-"),
		d.StartedAt.Unix())
	spec := *schedules[0].Spec.Template.DeepCopy()
	spec.Verify = schedules[0].Spec.Verify || spec.Verify
	b := &stewardv1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ec.Namespace,
		Labels: map[string]string{stewardv1.LabelCluster: ec.Name}}, Spec: spec}
	if err := r.Client.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("taking the backup before the downgrade: %w", err)
	}
	return name, nil
}

// downgradeBackup reads the backup status.downgrade names, for the plan.
func (r *EtcdClusterReconciler) downgradeBackup(ctx context.Context, ec *stewardv1.EtcdCluster) (*plan.BackupFact, error) {
	d := ec.Status.Downgrade
	if d == nil || d.Backup == "" || !d.Stage.Active() {
		return nil, nil
	}
	var b stewardv1.EtcdBackup
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: ec.Namespace, Name: d.Backup}, &b)
	if apierrors.IsNotFound(err) {
		return &plan.BackupFact{Name: d.Backup}, nil
	}
	if err != nil {
		return nil, err
	}
	return &plan.BackupFact{Name: d.Backup, Phase: b.Status.Phase, Message: b.Status.Message}, nil
}
