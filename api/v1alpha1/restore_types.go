package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BootstrapSpec says where a new cluster's data comes from: a snapshot (restore), or a running
// cluster Steward takes over (join). It is read only when the cluster is created and cannot change
// afterwards, except join.abort.
// +kubebuilder:validation:XValidation:rule="!(has(self.restore) && has(self.join))",message="spec.bootstrap: set restore or join, not both"
type BootstrapSpec struct {
	// restore seeds the new cluster from a snapshot.
	// +optional
	Restore *RestoreSpec `json:"restore,omitempty"`
	// join takes over a running etcd cluster: same cluster ID, same data, continuous revisions,
	// clients served throughout (docs/adopt.md).
	// +optional
	Join *JoinSpec `json:"join,omitempty"`
}

// RestoreSpec names the snapshot a new cluster starts from: an EtcdBackup, or an object directly.
// +kubebuilder:validation:XValidation:rule="[has(self.backupName), has(self.source), has(self.pointInTime)].filter(x, x).size() == 1",message="set exactly one of backupName, source or pointInTime"
type RestoreSpec struct {
	// backupName is a Succeeded EtcdBackup in the same namespace.
	// +optional
	// +kubebuilder:validation:MinLength=1
	BackupName string `json:"backupName,omitempty"`
	// source is a snapshot object written by Steward (or by etcdctl snapshot save) in a bucket or
	// volume.
	// +optional
	Source *RestoreSource `json:"source,omitempty"`
	// pointInTime restores the cluster as it was at a revision or a moment, from a schedule's
	// backups and continuous backup.
	// +optional
	PointInTime *PointInTimeSpec `json:"pointInTime,omitempty"`
	// bumpRevision is added to the snapshot's revision (etcdutl --bump-revision), and every
	// revision up to the new one is marked compacted, so watchers and Kubernetes clients never see
	// revisions go backwards: they must re-list.
	// +optional
	// +kubebuilder:default=1000000000
	// +kubebuilder:validation:Minimum=0
	BumpRevision *int64 `json:"bumpRevision,omitempty"`
}

// RestoreSource is an object in a bucket or a file on a volume.
type RestoreSource struct {
	BackupStorage `json:",inline"`
	// key is the snapshot's object key (including any prefix), or its path inside the volume.
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
	// sha256 of the object, when known; otherwise the manifest next to the object is trusted.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	SHA256 string `json:"sha256,omitempty"`
}

// BackupSummary is the cluster's newest successful backup.
type BackupSummary struct {
	// lastSuccessfulBackup is the newest Succeeded EtcdBackup of this cluster (bound to its UID;
	// a predecessor of the same name's never count), the one a quorum-loss restore uses. When the
	// newest asked for a restore drill that has not passed (pending or failed), an older verified
	// backup is named instead, and newerUnverified names the newest.
	// +optional
	LastSuccessfulBackup *BackupRef `json:"lastSuccessfulBackup,omitempty"`
	// newerUnverified is a Succeeded backup newer than lastSuccessfulBackup whose restore drill
	// is pending or failed: more recent data, not known to restore.
	// +optional
	NewerUnverified *BackupRef `json:"newerUnverified,omitempty"`
	// continuous is the continuous backup of the schedule that streams this cluster (the
	// schedule's status.continuous has the whole of it).
	// +optional
	Continuous *ContinuousSummary `json:"continuous,omitempty"`
}

// ContinuousSummary is how far a cluster's continuous backup has got.
type ContinuousSummary struct {
	Schedule string `json:"schedule"`
	// durableRevision and durableTime: the newest revision stored, and its stamp.
	// +optional
	DurableRevision int64 `json:"durableRevision,omitempty"`
	// +optional
	DurableTime *metav1.Time `json:"durableTime,omitempty"`
	// lagRevisions: revisions the watched member has that are not stored yet.
	// +optional
	LagRevisions int64 `json:"lagRevisions,omitempty"`
	// reportedAt is when the streamer was last heard from.
	// +optional
	ReportedAt *metav1.Time `json:"reportedAt,omitempty"`
	// lastDrill is the schedule's last drill of the chain (status.continuous.lastDrill).
	// +optional
	LastDrill *ChainDrill `json:"lastDrill,omitempty"`
}

// RestoreStatus records where a restored cluster's data came from.
type RestoreStatus struct {
	// source is the backup name or object location restored.
	Source string `json:"source"`
	// revision of the snapshot (before the bump).
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// restoredAt is when the restored seed formed the cluster.
	// +optional
	RestoredAt *metav1.Time `json:"restoredAt,omitempty"`
}
