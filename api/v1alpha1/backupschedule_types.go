package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdBackupScheduleSpec takes backups on a schedule and keeps the newest.
type EtcdBackupScheduleSpec struct {
	// schedule is a standard 5-field cron expression in UTC ("0 */6 * * *") or a descriptor
	// (@hourly, @daily, @every 30m).
	// +kubebuilder:validation:MinLength=1
	Schedule string `json:"schedule"`
	// suspend stops new backups; the ones taken are kept.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
	// concurrencyPolicy is Forbid: a run that comes due while the previous backup still runs is
	// skipped.
	// +optional
	// +kubebuilder:default=Forbid
	// +kubebuilder:validation:Enum=Forbid
	ConcurrencyPolicy string `json:"concurrencyPolicy,omitempty"`
	// startingDeadlineSeconds is how late a run may still start (after an operator outage, say);
	// later runs are counted as missed.
	// +optional
	// +kubebuilder:validation:Minimum=10
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`
	// template is the spec of each EtcdBackup the schedule creates (named <schedule>-<time>).
	Template EtcdBackupSpec `json:"template"`
	// retention says which successful backups to keep; older ones are deleted with their objects.
	// +optional
	// +kubebuilder:default={}
	Retention BackupRetention `json:"retention,omitempty"`
	// verify restores each new backup into a throwaway, network-isolated etcd and checks it;
	// a backup that fails verification sets BackupReady=False. With continuous, each new backup
	// also starts a drill of the chain (status.continuous.lastDrill): a random restorable revision
	// replayed, restored and compared key for key with the live cluster at that revision.
	// +optional
	Verify bool `json:"verify,omitempty"`
	// continuous streams every revision between backups into the destination, so a restore can
	// reach any revision or moment since the oldest kept backup (spec.bootstrap.restore.pointInTime).
	// It needs an S3 destination: a volume's claim is mounted by one node at a time.
	// +optional
	Continuous *ContinuousBackupSpec `json:"continuous,omitempty"`
}

// BackupRetention keeps the newest successful backups. The newest successful backup is never
// deleted, whatever these say.
type BackupRetention struct {
	// keepLast is how many successful backups to keep.
	// +optional
	// +kubebuilder:default=7
	// +kubebuilder:validation:Minimum=1
	KeepLast *int32 `json:"keepLast,omitempty"`
	// maxAge deletes successful backups older than this (for example "168h").
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// BackupRef names a successful backup.
type BackupRef struct {
	Name string `json:"name"`
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// verified: its restore drill passed.
	// +optional
	Verified bool `json:"verified,omitempty"`
}

// EtcdBackupScheduleStatus is what the schedule did.
type EtcdBackupScheduleStatus struct {
	// lastScheduleTime is the time slot of the newest backup the schedule created.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// lastSuccessfulBackup is the newest Succeeded backup of this schedule taken of the cluster as
	// it is now (its UID), preferring a verified one as the cluster's status.backup does.
	// +optional
	LastSuccessfulBackup *BackupRef `json:"lastSuccessfulBackup,omitempty"`
	// nextRun is when the next backup comes due (while not suspended).
	// +optional
	NextRun *metav1.Time `json:"nextRun,omitempty"`
	// active is the backup of this schedule that is still running, if any.
	// +optional
	Active string `json:"active,omitempty"`
	// kept counts the successful backups kept.
	// +optional
	Kept int32 `json:"kept,omitempty"`
	// missed counts runs skipped (previous backup still running, or too late to start).
	// +optional
	Missed int64 `json:"missed,omitempty"`
	// continuous is the continuous backup's state, while spec.continuous is set.
	// +optional
	Continuous *ContinuousBackupStatus `json:"continuous,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EtcdBackupSchedule creates EtcdBackups on a cron schedule and prunes old ones.
// +kubebuilder:object:root=true
// +kubebuilder:validation:XValidation:rule="!has(self.spec.continuous) || has(self.spec.template.destination.s3)",message="spec.continuous needs an S3 destination (spec.template.destination.s3): a volume is mounted by one node at a time"
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=etcdbackupschedule,categories=steward
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.template.clusterName`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Last",type=string,JSONPath=`.status.lastSuccessfulBackup.name`
// +kubebuilder:printcolumn:name="Kept",type=integer,JSONPath=`.status.kept`
// +kubebuilder:printcolumn:name="Next",type=date,JSONPath=`.status.nextRun`
type EtcdBackupSchedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec EtcdBackupScheduleSpec `json:"spec"`
	// +optional
	Status EtcdBackupScheduleStatus `json:"status,omitempty"`
}

// EtcdBackupScheduleList is a list of EtcdBackupSchedule.
// +kubebuilder:object:root=true
type EtcdBackupScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdBackupSchedule `json:"items"`
}
