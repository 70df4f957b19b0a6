package v1alpha1

// Every label, annotation and finalizer name Steward writes or reads is defined here, and only
// here: what each marks and who reads it.

// Labels.
const (
	// LabelCluster names the EtcdCluster on everything Steward creates for it (member Pods, PVCs,
	// Services, Secrets). Selectors use it, never user labels; the manager caches only Pods, PVCs
	// and Secrets carrying it, and kubectl-etcd finds a cluster's objects by it.
	LabelCluster = "etcd.steward.dev/cluster"
	// LabelMember names the member on its Pod and PVC.
	LabelMember = "etcd.steward.dev/member"
	// LabelVoter is "true" on Pods of voting members; the client Service selects it so learners
	// never receive client traffic. The drain sets it to resources.VoterDraining.
	LabelVoter = "etcd.steward.dev/voter"

	// LabelDiscardedFrom and LabelDiscardedOrdinal mark a PVC a quorum recovery detached from its
	// cluster and kept for forensics (with AnnotationDiscardedAt).
	LabelDiscardedFrom    = "etcd.steward.dev/discarded-from"
	LabelDiscardedOrdinal = "etcd.steward.dev/discarded-ordinal"

	// LabelSchedule names the EtcdBackupSchedule that created a backup. Backups are not owned by
	// their schedule: deleting a schedule keeps the backups it took (and their objects).
	LabelSchedule = "etcd.steward.dev/schedule"
	// LabelBackup names the EtcdBackup on its Jobs and their Pods; the manager caches only Jobs
	// carrying it. Backup Jobs carry no LabelCluster: that label means "a member's Pod" to the
	// cluster controller.
	LabelBackup = "etcd.steward.dev/backup"
	// LabelBackupOf names the EtcdCluster a backup is of: on the EtcdBackups a schedule creates,
	// and on backup Jobs and their Pods.
	LabelBackupOf = "etcd.steward.dev/backup-of"
	// LabelBackupTask is the task (save, verify, delete) a backup Job performs.
	LabelBackupTask = "etcd.steward.dev/backup-task"
)

// Annotations.
const (
	// AnnotationRecoverQuorum on an EtcdCluster asks Steward to recover a cluster that lost quorum:
	// "auto" takes the survivor status.quorumRecovery.plan names, a member name insists on that one.
	// It runs only when etcd's own evidence shows quorum lost (docs/operations.md); Steward removes the
	// annotation, with an Event saying why, when the recovery ends, is refused or is not needed.
	AnnotationRecoverQuorum = "etcd.steward.dev/recover-quorum"
	// AnnotationRecoverQuorumConfirm, set to the cluster's status.clusterID, lets the recover-quorum
	// annotation run a recovery when the evidence is incomplete: the operator cannot reach enough
	// members to prove quorum lost. The human confirms they know what the operator cannot see (the
	// unreachable members are gone for good); the ID makes the confirmation name this very cluster.
	AnnotationRecoverQuorumConfirm = "etcd.steward.dev/recover-quorum-confirm"
	// AnnotationDefragmentRequested asks for a defragmentation now, without touching the spec: an
	// RFC 3339 time on the EtcdCluster (every member) or on one EtcdMember (that member). Each member not
	// defragmented successfully since that time is defragmented once, through the chokepoint like any
	// other (followers first, the leader last); the annotation may stay, it is satisfied. It works even
	// with defragmentation.enabled false, which only stops Steward deciding on its own.
	AnnotationDefragmentRequested = "etcd.steward.dev/defragment-requested"
	// AnnotationFailpoint is for tests only: it names one point (internal/failpoint.Points) at which the
	// operator stops reconciling this EtcdCluster for good, so a fault campaign can kill it exactly
	// there. Only operator binaries built with the failpoints build tag honour it; release builds
	// ignore it.
	AnnotationFailpoint = "etcd.steward.dev/failpoint"

	// AnnotationTemplate on a member Pod holds the member template the Pod was built from (JSON). A
	// template is recorded on the EtcdMember before its Pod is created, so the record alone cannot say
	// what runs: status counts a member as updated, and the version step rule reads a member's version,
	// from the Pod itself. Pod metadata is patched in place and left out.
	AnnotationTemplate = "etcd.steward.dev/template"
	// AnnotationPodRevision on a member Pod is the resources.PodRevision it was built with.
	AnnotationPodRevision = "etcd.steward.dev/pod-revision"
	// AnnotationTrust on a member Pod records the CAs (fingerprints) its etcd loaded when it
	// started. etcd builds its trust pools once, so this, not the Secret, is what it trusts: tlsplan
	// reads it (FormatTrust, ParsePlaneTrust) to know which members a CA rotation must restart.
	AnnotationTrust = "etcd.steward.dev/trusted-cas"
	// AnnotationForceNewCluster marks the Pod of a quorum recovery's survivor started with
	// --force-new-cluster; the recovery replaces it with one without the flag.
	AnnotationForceNewCluster = "etcd.steward.dev/force-new-cluster"
	// AnnotationRestartedFrom records, with an in-place restart's change, the etcd container's ID
	// before it: the restart is done once the kubelet reports another container (plan.Pod).
	AnnotationRestartedFrom = "etcd.steward.dev/restarted-from"
	// AnnotationDrainingSince records when a member Pod was drained, so the voter label is not put
	// back while the disruption that followed is still under way (the controller's stillDraining).
	AnnotationDrainingSince = "etcd.steward.dev/draining-since"
	// AnnotationEvictionRequested on a member Pod is when (RFC 3339) an eviction of it was first
	// asked for (a node drain): the eviction webhook writes it before it answers, and the planner
	// prepares the member (internal/eviction). A request older than eviction.RequestLifetime is over.
	AnnotationEvictionRequested = "etcd.steward.dev/eviction-requested"
	// AnnotationEvictionPrepared on a member Pod is when (RFC 3339) the member was prepared for the
	// eviction requested: leadership moved off it and it left the client Service. The webhook then
	// lets the eviction through.
	AnnotationEvictionPrepared = "etcd.steward.dev/eviction-prepared"
	// AnnotationResizeRefused on a member Pod says why the API server refused to resize it in place;
	// the planner then rolls the member onto the new resources instead.
	AnnotationResizeRefused = "etcd.steward.dev/resize-refused"

	// AnnotationClusterUID on a PVC names the EtcdCluster incarnation that created it. A cluster
	// recreated under the same name has a new UID, so it recognises old data as foreign and never
	// mounts it (etcd would ignore the new --initial-cluster-token on a non-empty data dir).
	AnnotationClusterUID = "etcd.steward.dev/cluster-uid"
	// AnnotationDiscardedAt is when a quorum recovery detached a PVC from its cluster (see
	// LabelDiscardedFrom).
	AnnotationDiscardedAt = "etcd.steward.dev/discarded-at"

	// AnnotationRotateCA on the CA Secret is the spec.tls.rotateCA value the rotation in it was
	// started for. It is written with the next CA, in one write, so a crash can neither lose a
	// requested rotation nor start it twice.
	AnnotationRotateCA = "etcd.steward.dev/rotate-ca"
	// AnnotationBundleSince on the application client Secret is when its ca.crt last changed.
	AnnotationBundleSince = "etcd.steward.dev/bundle-since"

	// AnnotationPruned marks an EtcdBackup its schedule's retention deleted: its object goes with
	// it, whatever its deletionPolicy.
	AnnotationPruned = "etcd.steward.dev/pruned"
)

// Finalizers.
const (
	// FinalizerTeardown on an EtcdCluster lets Steward release members' finalizers and apply the
	// PVC retention policy when the cluster is deleted.
	FinalizerTeardown = "etcd.steward.dev/teardown"
	// FinalizerMember holds an EtcdMember until it has left etcd and its Pod (and PVC) are gone.
	FinalizerMember = "etcd.steward.dev/member"
	// FinalizerBackup holds an EtcdBackup until its object is deleted (deletionPolicy Delete, or
	// pruned by a schedule's retention).
	FinalizerBackup = "etcd.steward.dev/backup"
)
