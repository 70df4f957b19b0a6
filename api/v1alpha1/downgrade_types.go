package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DowngradeStage is where a downgrade through etcd's downgrade protocol stands.
// +kubebuilder:validation:Enum=Enabling;Enabled;Cancelling;Completed;Cancelled
type DowngradeStage string

const (
	// DowngradeEnabling: the intent is recorded (from, target, the backup taken first); etcd is
	// asked to validate and enable the downgrade next.
	DowngradeEnabling DowngradeStage = "Enabling"
	// DowngradeEnabled: etcd's downgrade is enabled; once every member reports the lower storage
	// version, members roll onto the older image one at a time, the leader last.
	DowngradeEnabled DowngradeStage = "Enabled"
	// DowngradeCancelling: spec.version went back up while versions were mixed: etcd's downgrade
	// cancel, then the members already on the older image roll forward again.
	DowngradeCancelling DowngradeStage = "Cancelling"
	// DowngradeCompleted: every member runs the target and etcd ended the downgrade.
	DowngradeCompleted DowngradeStage = "Completed"
	// DowngradeCancelled: the downgrade was cancelled and every member runs the newer version again.
	DowngradeCancelled DowngradeStage = "Cancelled"
)

// Active reports whether the stage is one of a downgrade still in progress.
func (s DowngradeStage) Active() bool {
	return s == DowngradeEnabling || s == DowngradeEnabled || s == DowngradeCancelling
}

// DowngradeStatus is a downgrade by one minor version through etcd's own protocol (downgrade
// validate, enable, storage version lowered, members rolled leader last; cancel while mixed): the
// one in progress, or the last one.
type DowngradeStatus struct {
	// from is the version the members ran when the downgrade started.
	From string `json:"from"`
	// target is the spec.version downgraded to.
	Target string `json:"target"`
	// stage is where it stands.
	Stage DowngradeStage `json:"stage"`
	// startedAt is when the intent was recorded.
	StartedAt metav1.Time `json:"startedAt"`
	// finishedAt is when it completed or was cancelled.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
	// backup names the EtcdBackup taken before etcd's downgrade was enabled; empty when no
	// EtcdBackupSchedule names a destination for this cluster.
	// +optional
	Backup string `json:"backup,omitempty"`
	// message says what the stage waits for.
	// +optional
	Message string `json:"message,omitempty"`
}
