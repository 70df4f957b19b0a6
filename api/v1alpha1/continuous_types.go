package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ContinuousBackupSpec turns on a schedule's continuous backup: a streamer (a Deployment of the
// Steward image, never the operator) watches the cluster's whole keyspace from the newest backup's
// revision and writes every revision, in segments, next to the backups. The schedule's backups are
// the bases a point-in-time restore replays from; retention keeps every segment a kept backup
// needs (docs/backup.md, "Point-in-time restore").
type ContinuousBackupSpec struct {
	// segmentSeconds closes a segment this long after its first revision: the most a sudden loss of
	// the streamer and the cluster together can lose, plus one upload.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=300
	SegmentSeconds int32 `json:"segmentSeconds,omitempty"`
	// segmentMaxMiB closes a segment at this size, before segmentSeconds under heavy writes.
	// +optional
	// +kubebuilder:default=8
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	SegmentMaxMiB int32 `json:"segmentMaxMiB,omitempty"`
}

// ContinuousBackupStatus is what the streamer has made durable, as it last reported.
type ContinuousBackupStatus struct {
	// durableRevision is the newest revision stored; durableTime its stamp (the streamer's clock
	// when the revision reached it).
	// +optional
	DurableRevision int64 `json:"durableRevision,omitempty"`
	// +optional
	DurableTime *metav1.Time `json:"durableTime,omitempty"`
	// headRevision is the newest revision the watched member reported.
	// +optional
	HeadRevision int64 `json:"headRevision,omitempty"`
	// lagRevisions is headRevision - durableRevision: revisions a loss now would cost.
	// +optional
	LagRevisions int64 `json:"lagRevisions,omitempty"`
	// restorable are the ranges a point-in-time restore can reach, oldest first; the revisions
	// between two ranges are a hole (the streamer's watch was compacted away).
	// +optional
	Restorable []RestorableRange `json:"restorable,omitempty"`
	// hole says when the streamer last lost revisions, and which.
	// +optional
	Hole string `json:"hole,omitempty"`
	// waiting says why nothing streams now: no base backup yet, a hole waiting for a newer base,
	// a restart after an error, or an encryption key that is missing.
	// +optional
	Waiting string `json:"waiting,omitempty"`
	// keyID is the public recipient (age1...) of the key the streamer seals segments with, when
	// the destination is encrypted.
	// +optional
	KeyID string `json:"keyID,omitempty"`
	// reportedAt is when the streamer was last heard from.
	// +optional
	ReportedAt *metav1.Time `json:"reportedAt,omitempty"`
	// lastDrill is the last drill of the chain (spec.verify with continuous: one per new base).
	// +optional
	LastDrill *ChainDrill `json:"lastDrill,omitempty"`
}

// ChainDrill is the result of a point-in-time drill: a random revision of the restorable range
// that the live cluster still holds, replayed, restored into a throwaway etcd, and its whole
// keyspace compared with the live cluster's at that revision.
type ChainDrill struct {
	// base is the backup whose arrival started the drill.
	Base string `json:"base"`
	// time the drill finished.
	Time metav1.Time `json:"time"`
	// revision restored and compared (0 when the drill failed before choosing one).
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// verified: the restored keyspace equals the live cluster's at revision.
	Verified bool `json:"verified"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	DurationSeconds int64 `json:"durationSeconds,omitempty"`
}

// RestorableRange is a run of revisions a restore can reach, and the times they were stamped.
type RestorableRange struct {
	FromRevision int64 `json:"fromRevision"`
	ToRevision   int64 `json:"toRevision"`
	// +optional
	FromTime *metav1.Time `json:"fromTime,omitempty"`
	// +optional
	ToTime *metav1.Time `json:"toTime,omitempty"`
	// base is the backup the range starts from.
	// +optional
	Base string `json:"base,omitempty"`
}

// PointInTimeSpec restores a cluster as it was at one revision, or at one moment, from an
// EtcdBackupSchedule's backups and continuous backup: the newest backup at or before the target,
// then every revision after it up to the target, replayed offline one transaction each.
// +kubebuilder:validation:XValidation:rule="has(self.revision) != has(self.time)",message="set exactly one of revision or time"
type PointInTimeSpec struct {
	// scheduleName is an EtcdBackupSchedule in the same namespace with continuous backup on; its
	// template names the cluster and the destination.
	// +kubebuilder:validation:MinLength=1
	ScheduleName string `json:"scheduleName"`
	// revision restores the keyspace exactly as etcd served it at this revision.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Revision *int64 `json:"revision,omitempty"`
	// time restores the last revision stamped at or before it (RFC 3339). etcd keeps no time:
	// revisions are stamped by the streamer as they reach it (docs/backup.md says how close
	// that is); status.restore names the revision it chose.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}
