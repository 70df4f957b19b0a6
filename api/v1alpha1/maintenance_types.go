package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaintenanceSpec is the upkeep Steward does on its own to keep etcd's storage healthy.
type MaintenanceSpec struct {
	// defragmentation returns the space etcd freed (deletes, compaction) to the filesystem. On by
	// default, driven by a fragmentation threshold and, optionally, a schedule.
	// +optional
	// +kubebuilder:default={}
	Defragmentation DefragmentationSpec `json:"defragmentation,omitempty"`

	// nospace is what Steward does when etcd raises NOSPACE (the backend quota is full and the
	// cluster takes only reads and deletes). Recover (the default): defragment members one at a
	// time; if space is still short, compact history (the oldest first, keeping the newest 1000
	// revisions if that is enough); disarm once every member's file is under 80% of its quota.
	// No member is restarted. Report: only say so in the Degraded condition.
	// +optional
	// +kubebuilder:default=Recover
	NoSpace NoSpacePolicy `json:"nospace,omitempty"`
}

// NoSpacePolicy is what Steward does about a NOSPACE alarm.
// +kubebuilder:validation:Enum=Recover;Report
type NoSpacePolicy string

const (
	NoSpaceRecover NoSpacePolicy = "Recover"
	NoSpaceReport  NoSpacePolicy = "Report"
)

// MaintenanceStatus records the maintenance Steward did on the cluster as a whole.
type MaintenanceStatus struct {
	// lastCompaction is the latest history compaction Steward made (to recover from NOSPACE).
	// +optional
	LastCompaction *CompactionRecord `json:"lastCompaction,omitempty"`
	// lastDisarm is when Steward last disarmed a NOSPACE alarm.
	// +optional
	LastDisarm *metav1.Time `json:"lastDisarm,omitempty"`
}

// CompactionRecord is one compaction of etcd's history.
type CompactionRecord struct {
	// revision compacted to: older revisions are gone (reads and watches below it fail).
	Revision int64 `json:"revision"`
	// headRevision was the cluster's revision at the time.
	HeadRevision int64       `json:"headRevision"`
	Time         metav1.Time `json:"time"`
	// reason says why.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// DefragmentationSpec says when a member is defragmented. A defragmentation blocks the member's
// reads and writes while it runs, so it is a disruption like a restart: one member at a time,
// followers first (most fragmented first), the leader last after leadership moved away, each after
// the cluster passed the recovery gate. A single-member cluster only with
// spec.updateStrategy.allowDowntime.
type DefragmentationSpec struct {
	// enabled turns defragmentation by Steward on (the default) or off.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// schedule (cron in UTC, or @daily, @every 24h) defragments every member at least once per
	// period, whatever its fragmentation; a member defragmented since the last run is skipped.
	// +optional
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:XValidation:rule="self.matches('^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|@every [0-9.]+[a-z]+([0-9.]+[a-z]+)*|[^ ]+ [^ ]+ [^ ]+ [^ ]+ [^ ]+)$')",message="spec.maintenance.defragmentation.schedule must be a 5-field cron expression (\"0 3 * * 0\") or a descriptor (@daily, @every 12h)"
	Schedule string `json:"schedule,omitempty"`

	// fragmentationPercent: a member is defragmented when (dbSize - dbSizeInUse) / dbSize reaches
	// this share, and its dbSize is at least minDBSize. Checked every 30 seconds.
	// +optional
	// +kubebuilder:default=45
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	FragmentationPercent *int32 `json:"fragmentationPercent,omitempty"`

	// minDBSize: a smaller database is not worth a disruption, however fragmented.
	// +optional
	// +kubebuilder:default="100Mi"
	MinDBSize *resource.Quantity `json:"minDBSize,omitempty"`
}

// DefragmentationOutcome is how a defragmentation ended.
// +kubebuilder:validation:Enum=Succeeded;Failed;Interrupted
type DefragmentationOutcome string

const (
	DefragmentationSucceeded DefragmentationOutcome = "Succeeded"
	DefragmentationFailed    DefragmentationOutcome = "Failed"
	// DefragmentationInterrupted: the operator stopped while it ran; etcd may have finished it.
	DefragmentationInterrupted DefragmentationOutcome = "Interrupted"
)

// DefragmentationTrigger is why a member was defragmented.
// +kubebuilder:validation:Enum=Threshold;Schedule;NoSpace;Requested
type DefragmentationTrigger string

const (
	DefragmentationThreshold DefragmentationTrigger = "Threshold"
	DefragmentationSchedule  DefragmentationTrigger = "Schedule"
	DefragmentationNoSpace   DefragmentationTrigger = "NoSpace"
	// DefragmentationRequested: AnnotationDefragmentRequested asked for it.
	DefragmentationRequested DefragmentationTrigger = "Requested"
)

// DefragmentationResult is one defragmentation of one member.
type DefragmentationResult struct {
	// time the defragmentation ended.
	Time metav1.Time `json:"time"`
	// outcome: Succeeded, Failed, or Interrupted (the operator stopped while it ran).
	Outcome DefragmentationOutcome `json:"outcome"`
	// trigger: the fragmentation threshold or the schedule.
	// +optional
	Trigger DefragmentationTrigger `json:"trigger,omitempty"`
	// sizeBefore and sizeAfter are the member's dbSize before and after.
	// +optional
	SizeBefore *resource.Quantity `json:"sizeBefore,omitempty"`
	// +optional
	SizeAfter *resource.Quantity `json:"sizeAfter,omitempty"`
	// durationMilliseconds the member was blocked.
	// +optional
	DurationMilliseconds int64 `json:"durationMilliseconds,omitempty"`
	// message says why it failed.
	// +optional
	Message string `json:"message,omitempty"`
}

// MemberDefragmentation is a member's defragmentation record.
type MemberDefragmentation struct {
	// startedAt is set (intent) just before Steward asks the member to defragment, and cleared with
	// the result: while set, the member counts as disrupted.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// startedTrigger and startedSize are what the defragmentation in flight started from.
	// +optional
	StartedTrigger DefragmentationTrigger `json:"startedTrigger,omitempty"`
	// +optional
	StartedSize *resource.Quantity `json:"startedSize,omitempty"`
	// last is the latest finished defragmentation.
	// +optional
	Last *DefragmentationResult `json:"last,omitempty"`
	// lastSucceeded is when the member was last defragmented successfully: the schedule counts
	// its periods from it.
	// +optional
	LastSucceeded *metav1.Time `json:"lastSucceeded,omitempty"`
	// afterCompaction is the revision of Steward's latest compaction (status.maintenance.
	// lastCompaction) when this member was last defragmented successfully: a member not
	// defragmented since a compaction is, during a NOSPACE recovery.
	// +optional
	AfterCompaction int64 `json:"afterCompaction,omitempty"`
	// consecutiveFailures counts failed defragmentations since the last success; at 3 the
	// cluster is Degraded.
	// +optional
	ConsecutiveFailures int32 `json:"consecutiveFailures,omitempty"`
}

// NoSpacePolicy is the cluster's spec.maintenance.nospace, Recover when unset.
func (s *EtcdClusterSpec) NoSpacePolicy() NoSpacePolicy {
	if s.Maintenance == nil || s.Maintenance.NoSpace == "" {
		return NoSpaceRecover
	}
	return s.Maintenance.NoSpace
}

// DefragmentationEnabled says whether Steward defragments this cluster's members.
func (s *EtcdClusterSpec) DefragmentationEnabled() bool {
	return s.Maintenance == nil || s.Maintenance.Defragmentation.Enabled == nil || *s.Maintenance.Defragmentation.Enabled
}
