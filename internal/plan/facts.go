// Package plan is Steward's decision logic: from the facts one reconcile gathered to the single next
// action. It is pure (no clients, no I/O, no clock: time comes in as Facts.Now), so every decision is
// table-testable and a restarted operator decides the same thing from the same facts.
//
// The priority order is the step list in steps.go (docs/rollout.md prints it, generated); each
// step returns a typed outcome, and the filters in Plan (pause, TLS, image) come after it.
//
// Every disruption the plan proposes has already passed disruption.Check on the same facts; the
// controller must still carry it out through a disruption.Disrupter, which checks again.
package plan

import (
	"time"

	"github.com/etcd-steward/steward/internal/authplan"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/health"
)

// Facts are everything one reconcile gathered. The controller fills them from live reads.
type Facts struct {
	// Cluster is the EtcdCluster: spec, status.observed, status.clusterID, deletion timestamp.
	Cluster *stewardv1.EtcdCluster
	// Members are the EtcdMember objects of this cluster, with their Pod and PVC.
	Members []Member
	// Etcd is what etcd said in this reconcile: member list, endpoint statuses, reads.
	Etcd health.Facts
	// EtcdClusterID is the cluster ID (hex) the member list came with; "" when it was not read.
	EtcdClusterID string
	// Now is the time of this reconcile. The step clock (progressDeadlineSeconds) comes from
	// Cluster.Status.LastStep and the members' PhaseSince, never from the controller's memory.
	Now time.Time
	// Limits override the defaults; zero fields keep them.
	Limits Limits
	// TLS is what the certificate step (internal/tlsplan) reported.
	TLS TLS
	// RestoreHold says why spec.bootstrap.restore cannot seed the cluster (a missing, failed or
	// too-new backup); while set, a cluster that never formed creates nothing.
	RestoreHold string
	// ImageHold says why the Steward image is unknown (the controller could not resolve it). A
	// member Pod starts etcd through the data check that image carries; without it no Pod is
	// started and none taken away (it could not come back), rather than one running unchecked.
	ImageHold string
	// DefragScheduleError says why spec.maintenance.defragmentation.schedule is not used (it
	// passed the CRD's shape check but does not parse); "" when fine or unset.
	DefragScheduleError string
	// ReservedOrdinals are held by PVCs a quorum recovery detached and kept: no new member takes
	// them (its PVC name would collide with stale data).
	ReservedOrdinals []int32
	// Observer names this operator process (a new one on every start). Status records which process
	// has watched a quorum loss, so only time the running operator itself saw counts towards
	// spec.quorumLoss.afterSeconds.
	Observer string
	// PodRevision is how this Steward builds member Pods (resources.PodRevision); a Pod built with
	// an older one is rolled like an outdated template, so an operator upgrade that changes the Pod
	// (security context, probes, flags) reaches every member one at a time. 0 turns the check off.
	PodRevision int
	// CRL: members are to run with etcd's certificate revocation list (resources.ServesCRL: spec.auth
	// on a cluster whose CA Steward holds). A Pod that differs is rebuilt like an outdated one,
	// one at a time; tenant users are created only once every member serves the list.
	CRL bool
	// Adoption is what the controller read for a cluster taking over a running one
	// (spec.bootstrap.join); nil for other clusters. The source's members themselves are in Etcd:
	// the live members no EtcdMember claims, each endpoint named SourceName.
	Adoption *Adoption
	// ContinuousDurable is the lowest revision a running continuous backup of this cluster has
	// stored (0: none runs). Steward's own compactions never pass it: the revisions after it exist
	// only in etcd until the streamer stores them.
	ContinuousDurable int64
	// DowngradeBackup is the backup status.downgrade.backup names, as read live; nil when it names
	// none. Phase "" when it is not found.
	DowngradeBackup *BackupFact
	// Auth is etcd authentication's next step as internal/authplan decided it from what etcd
	// reported; the zero Step when the cluster declares no auth (or it was not read: nothing to do).
	Auth authplan.Step
}

// BackupFact is one EtcdBackup's outcome.
type BackupFact struct {
	Name    string
	Phase   stewardv1.BackupPhase
	Message string
}

// Adoption is what the plan needs beyond etcd's own reads to hand a source over.
type Adoption struct {
	// Checks are the preflight's verdict (internal/adoption.Preflight) on this reconcile's live
	// reads; run only until the hand-over started.
	Checks []stewardv1.AdoptionCheck
	// StatefulSet is the named source StatefulSet as read live (nil when none is named).
	StatefulSet *SourceSet
}

// SourceSet is the source's StatefulSet.
type SourceSet struct {
	Name  string
	Found bool
	// Replicas is spec.replicas.
	Replicas int32
	// Pods are its Pods that exist (terminating ones included), by name.
	Pods []SourcePod
}

// SourcePod is one Pod of the source's StatefulSet.
type SourcePod struct {
	Name     string
	Deleting bool
}

// TLS is the certificate step's verdict for the plan.
type TLS struct {
	// Hold: material is missing or unsafe; no Pod is created and no member disrupted.
	Hold string
	// Pending: certificate work without disruption is in flight; the cluster is not reconciled.
	Pending string
	// AwaitingClients: a CA rotation waits for the user to restart clients that load
	// certificates once and approve dropping the old CA (Pending says how).
	AwaitingClients bool
}

// Member is one EtcdMember with what the controller saw of its Pod and PVC.
type Member struct {
	Name    string
	Ordinal int32
	// PeerURL is the member's peer URL; the plan matches it against the live member list (never a
	// cached ID, invariant 5).
	PeerURL string
	// Phase and ID are the member's recorded status.
	Phase stewardv1.MemberPhase
	ID    string
	// PhaseSince is when the recorded phase was written; zero when unknown.
	PhaseSince time.Time
	// Replacing is the member's status.replacing: removed to be replaced, not a voter again yet.
	Replacing bool
	// ReplacedElsewhere is the member's status.replacedElsewhere: why it is replaced on another
	// node under a new name (a node loss); "" otherwise.
	ReplacedElsewhere string
	// Nodes are its Pod's node, its volume's node and etcd's leader's view of it (node loss).
	Nodes NodeFacts
	// Deleting is true when the EtcdMember has a deletion timestamp: a scale-down is under way and
	// the member's finalizer waits for the plan to remove it from etcd and delete its Pod and PVC.
	Deleting bool
	// Template is spec.template: what the member's Pod is (or will be) built from.
	Template stewardv1.MemberTemplate
	Pod      Pod
	PVC      PVC
	// DataVersion is the member's status.dataVersion: the etcd version its data was last written
	// by, recorded while its etcd ran; nil when never recorded.
	DataVersion *stewardv1.DataVersion
	// Defrag is the member's defragmentation record (status.defragmentation); nil when none.
	Defrag *stewardv1.MemberDefragmentation
	// DefragScheduled: spec.maintenance.defragmentation.schedule has fired since the member was
	// last defragmented (or created).
	DefragScheduled bool
	// DefragRequested: a defragmentation was asked for (AnnotationDefragmentRequested on the cluster
	// or the member) after the member's last successful one.
	DefragRequested bool
	// TrustOutdated: the member's etcd started with other trusted CAs than its TLS Secret now
	// holds (a CA rotation pass); loading them takes a restart, so the member is rolled.
	TrustOutdated bool
}

// Pod is what the controller saw of the member's Pod.
type Pod struct {
	Exists   bool
	Phase    corev1.PodPhase
	Ready    bool
	Deleting bool
	// Failed: the Pod's phase is Failed (evicted, rejected at admission after a node reboot): its
	// containers never run again, whatever the restart policy.
	Failed bool
	// RestartCount of the etcd container over the Pod's whole life; old restarts say nothing about
	// now, so it never decides alone (see crashLooping).
	RestartCount int32
	// LastTerminationReason of the etcd container, e.g. OOMKilled, Error.
	LastTerminationReason string
	// LastTerminatedAt is when the etcd container last exited; zero if it never did.
	LastTerminatedAt time.Time
	// BackOff: the kubelet holds the etcd container in CrashLoopBackOff right now.
	BackOff bool
	// Stopped: the kubelet reports the etcd container not running right now (exited, or waiting
	// to start again); false when it runs or no container status is reported yet.
	Stopped bool
	// NotReadySince is when the Pod's Ready condition last turned False; zero while Ready.
	NotReadySince time.Time
	// DeletingSince is the Pod's deletion timestamp; zero unless Deleting.
	DeletingSince time.Time
	// Template is the member template the Pod was built from (its annotation); nil when the Pod
	// does not say (built by an older Steward), in which case the member's record stands for it.
	Template *stewardv1.MemberTemplate
	// ServesCRL: the Pod's etcd runs with the revocation list (resources.PodServesCRL).
	ServesCRL bool
	// DataLost is the data check's verdict when the etcd container refused to start on its data
	// directory (empty, or another member's; internal/datacheck); "" otherwise.
	DataLost string
	// VersionRefused is the data check's verdict when the etcd container refused to start because
	// its etcd is more than one minor newer than the data's storage version, or older than it
	// (internal/datacheck); "" otherwise. The data is intact: it is never replaced for this.
	VersionRefused string
	// JoinRefused is the data check's verdict when the etcd container, joining with no data yet, got
	// the member list from no peer and exited (internal/datacheck JoinRefused: the peers' answer,
	// such as an adopted source's peer port refusing the member's certificate); "" otherwise, and
	// while the container runs again.
	JoinRefused string
	// ForceNewCluster: the Pod was built to start etcd with --force-new-cluster (a quorum
	// recovery's survivor).
	ForceNewCluster bool
	// Unschedulable is true when the scheduler reported the Pod cannot be placed.
	Unschedulable bool
	// Resize is the state of an in-place resize of the etcd container.
	Resize Resize
	// ImageOnly: the Pod built for the target template would differ from this one only in the etcd
	// container's image (a patch upgrade, a registry move): the container can restart in place.
	ImageOnly bool
	// Revision is the Pod revision it was built with (its annotation); 0 when it does not say (built
	// before revisions were recorded).
	Revision int
	// NodeReady: the Pod's Node is Ready, so what its kubelet reports is current; false when it is
	// not, or was not read (the node is read only while quorum is in doubt).
	NodeReady bool
	// NodeGone: the Pod's Node is deleted or tainted node.kubernetes.io/out-of-service.
	NodeGone bool
	// Node is the node the Pod is scheduled on ("" until it is); Zone is that node's
	// topology.kubernetes.io/zone label ("" when it has none or was not read).
	Node, Zone string
	// Generation is the Pod's metadata.generation; ReadyObservedGeneration is the generation its
	// Ready condition was computed for (0 when the kubelet does not say).
	Generation, ReadyObservedGeneration int64
	// ContainerID and ContainerReady are the kubelet's report of the etcd container now.
	ContainerID    string
	ContainerReady bool
	// RestartedFrom is the etcd container's ID when Steward restarted it in place (recorded on the
	// Pod with the change); "" when the Pod was never restarted in place.
	RestartedFrom string
	// EvictionRequested is when an eviction of the Pod was first asked for (a node drain, recorded
	// by the eviction webhook); zero when none was. It counts for eviction.RequestLifetime.
	EvictionRequested time.Time
	// EvictionPrepared: the Pod was prepared for that eviction (leadership moved, out of the client
	// Service); the webhook lets the eviction through.
	EvictionPrepared bool
}

// Resize is what the Pod says of its etcd container's resources.
type Resize struct {
	// Spec is what the Pod spec asks for now (a resize request changes it at once).
	Spec corev1.ResourceRequirements
	// Applied: the kubelet has seen the Pod spec's latest generation and runs the container with
	// those resources (no resize pending or in progress).
	Applied bool
	// Pending is the PodResizePending condition's reason (Infeasible, Deferred), since PendingSince.
	Pending      string
	PendingSince time.Time
	// Refused is why the API server refused a resize (recorded on the Pod by the controller).
	Refused string
}

// PVC is what the controller saw of the member's PersistentVolumeClaim.
type PVC struct {
	Exists   bool
	Deleting bool
	// Requested is spec.resources.requests.storage; Capacity is status.capacity.storage.
	Requested resource.Quantity
	Capacity  resource.Quantity
	// Resizable is true when the StorageClass allows volume expansion.
	Resizable bool
	// FileSystemResizePending is true when the volume grew but the filesystem waits for a Pod restart.
	FileSystemResizePending bool
	// Foreign is true when the PVC is not owned by this EtcdCluster (left over from a deleted cluster
	// of the same name): the plan never deletes or adopts it.
	Foreign bool
}

// Limits are the plan's thresholds.
type Limits struct {
	// CrashLoopRestarts: a member whose etcd crashed more often than this (not OOM-killed; the
	// restarts plus the crash the kubelet is backing off from) while the others hold quorum is
	// replaced, if it also crash-loops now (see CrashLoopWindow).
	CrashLoopRestarts int32
	// CrashLoopWindow: a member counts as crash-looping only after its Pod has been unready this
	// long, crashing within it, and etcd has not heard from it.
	CrashLoopWindow time.Duration
	// StuckTerminating: a Pod terminating longer than this is reported with the command to run.
	StuckTerminating time.Duration
	// LearnerTimeout: a learner not promotable for this long is removed and retried.
	LearnerTimeout time.Duration
	// ResizeDeferred: a resize the kubelet defers (not enough room on the node now) this long is
	// given up for a restart onto the new template.
	ResizeDeferred time.Duration
	// AppliedIndexTolerance for the recovery gate (health.DefaultAppliedIndexTolerance).
	AppliedIndexTolerance uint64
}

// Default limits. Three crashes in a row with the kubelet's back-off (10 s, 20 s) take about 30 s;
// with the Pod unready for 30 s, its etcd silent and the last crash recent, a member is replaced about
// half a minute after its loop began. The evidence is what makes that safe, not the count: a member
// whose etcd answers, or that was Ready within the window, is never replaced, and a slow start is no
// crash (the startup probe allows 5 minutes before the kubelet restarts etcd). A learner gets ten
// minutes: catching up means receiving a snapshot of up to the backend quota (8 GiB at most) over the
// peer network.
const (
	DefaultCrashLoopRestarts int32         = 2
	DefaultCrashLoopWindow   time.Duration = 30 * time.Second
	DefaultLearnerTimeout    time.Duration = 10 * time.Minute
	DefaultStuckTerminating  time.Duration = 5 * time.Minute
	DefaultResizeDeferred    time.Duration = time.Minute
)

func (l Limits) withDefaults() Limits {
	if l.CrashLoopRestarts == 0 {
		l.CrashLoopRestarts = DefaultCrashLoopRestarts
	}
	if l.CrashLoopWindow == 0 {
		l.CrashLoopWindow = DefaultCrashLoopWindow
	}
	if l.ResizeDeferred == 0 {
		l.ResizeDeferred = DefaultResizeDeferred
	}
	if l.StuckTerminating == 0 {
		l.StuckTerminating = DefaultStuckTerminating
	}
	if l.LearnerTimeout == 0 {
		l.LearnerTimeout = DefaultLearnerTimeout
	}
	if l.AppliedIndexTolerance == 0 {
		l.AppliedIndexTolerance = health.DefaultAppliedIndexTolerance
	}
	return l
}

// replicas is spec.replicas with its default.
func (f *Facts) replicas() int {
	if f.Cluster.Spec.Replicas == nil {
		return 3
	}
	return int(*f.Cluster.Spec.Replicas)
}

func (f *Facts) medium() stewardv1.StorageMedium { return f.Cluster.Spec.Storage.Medium }

func (f *Facts) memory() bool { return f.medium() == stewardv1.StorageMediumMemory }

func (f *Facts) strategy() stewardv1.UpdateStrategyType {
	if f.Cluster.Spec.UpdateStrategy.Type == "" {
		return stewardv1.RollingUpdate
	}
	return f.Cluster.Spec.UpdateStrategy.Type
}

func (f *Facts) progressDeadline() time.Duration {
	if d := f.Cluster.Spec.ProgressDeadlineSeconds; d != nil {
		return time.Duration(*d) * time.Second
	}
	return 600 * time.Second
}
