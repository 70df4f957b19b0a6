package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// BackupStorage is where backup objects live: exactly one of s3 or volume.
// +kubebuilder:validation:XValidation:rule="has(self.s3) != has(self.volume)",message="set exactly one of s3 or volume"
type BackupStorage struct {
	// s3 is an S3-compatible bucket (AWS S3, MinIO, versitygw, Ceph RGW, …).
	// +optional
	S3 *S3Storage `json:"s3,omitempty"`
	// volume is a PersistentVolumeClaim in the backup's namespace, mounted by the backup Job.
	// +optional
	Volume *VolumeStorage `json:"volume,omitempty"`
	// encryption seals every snapshot and continuous-backup segment written here with age
	// (X25519, ChaCha20-Poly1305 in 64 KiB chunks) before it leaves the Pod, and opens them for
	// restores and drills. Objects written before it was set stay readable.
	// +optional
	Encryption *BackupEncryption `json:"encryption,omitempty"`
}

// BackupEncryption names the keys that seal and open backups.
type BackupEncryption struct {
	// keySecretRef names a Secret key in the same namespace holding an age identity file
	// (age-keygen's output): one or more identities, one per line. The first seals what is
	// written; every one opens what is read, so a rotation puts a new identity first and keeps
	// the old ones below it for as long as their objects are kept. Manifests and status name a
	// key by its public recipient (age1...), never the key. Read only by the Pods that move data
	// and by the operator's check that the key is there and parses.
	KeySecretRef EncryptionKeyRef `json:"keySecretRef"`
}

// EncryptionKeyRef is a key of a Secret holding age identities.
type EncryptionKeyRef struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +optional
	// +kubebuilder:default=keys.txt
	Key string `json:"key,omitempty"`
}

// S3Storage is a bucket of an S3-compatible object store.
type S3Storage struct {
	// bucket must exist; Steward never creates buckets.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Bucket string `json:"bucket"`
	// prefix is prepended to every object key (for example "prod/"); objects are stored under
	// <prefix><namespace>/<cluster>/<backup>/.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/')",message="prefix must not start with '/'"
	Prefix string `json:"prefix,omitempty"`
	// endpoint is the S3 API URL (http:// or https://); empty means AWS S3 in region.
	// +optional
	// +kubebuilder:validation:Pattern=`^https?://[^/\s]+/?$`
	Endpoint string `json:"endpoint,omitempty"`
	// region of the bucket.
	// +optional
	// +kubebuilder:default=us-east-1
	Region string `json:"region,omitempty"`
	// forcePathStyle addresses the bucket as <endpoint>/<bucket> instead of <bucket>.<endpoint>
	// (most self-hosted servers need it).
	// +optional
	ForcePathStyle bool `json:"forcePathStyle,omitempty"`
	// credentialsSecretRef names a Secret in the same namespace holding the access key. It is read
	// only by the Pods that move data, never by the operator's logs, status or Events.
	CredentialsSecretRef S3CredentialsRef `json:"credentialsSecretRef"`
	// caBundleSecretRef names a Secret key holding PEM CA certificates to trust for an https
	// endpoint signed by a private CA.
	// +optional
	CABundleSecretRef *SecretKeyRef `json:"caBundleSecretRef,omitempty"`
}

// S3CredentialsRef names the Secret and its keys.
type S3CredentialsRef struct {
	// name of the Secret.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// accessKeyIDKey is the key of the access key ID.
	// +optional
	// +kubebuilder:default=accessKeyID
	AccessKeyIDKey string `json:"accessKeyIDKey,omitempty"`
	// secretAccessKeyKey is the key of the secret access key.
	// +optional
	// +kubebuilder:default=secretAccessKey
	SecretAccessKeyKey string `json:"secretAccessKeyKey,omitempty"`
	// sessionTokenKey is the key of a session token, for temporary credentials.
	// +optional
	SessionTokenKey string `json:"sessionTokenKey,omitempty"`
}

// SecretKeyRef is one key of a Secret in the same namespace.
type SecretKeyRef struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +optional
	// +kubebuilder:default=ca.crt
	Key string `json:"key,omitempty"`
}

// VolumeStorage is a directory on a PersistentVolumeClaim.
type VolumeStorage struct {
	// persistentVolumeClaimName is a claim in the backup's namespace (ReadWriteOnce is enough
	// while one backup runs at a time).
	// +kubebuilder:validation:MinLength=1
	PersistentVolumeClaimName string `json:"persistentVolumeClaimName"`
	// path is a directory inside the volume, relative to its root.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.contains('..')",message="path must be relative and must not contain '..'"
	Path string `json:"path,omitempty"`
}

// BackupCompression is how the snapshot is stored.
// +kubebuilder:validation:Enum=zstd;none
type BackupCompression string

const (
	CompressionZstd BackupCompression = "zstd"
	CompressionNone BackupCompression = "none"
)

// BackupDeletionPolicy says what deleting an EtcdBackup does to its object.
// +kubebuilder:validation:Enum=Retain;Delete
type BackupDeletionPolicy string

const (
	// DeletionRetain keeps the object when the EtcdBackup is deleted.
	DeletionRetain BackupDeletionPolicy = "Retain"
	// DeletionDelete removes the object with the EtcdBackup.
	DeletionDelete BackupDeletionPolicy = "Delete"
)

// EtcdBackupSpec is one snapshot of a cluster. It cannot change once created.
type EtcdBackupSpec struct {
	// clusterName is the EtcdCluster to back up, in the same namespace.
	// +kubebuilder:validation:MinLength=1
	ClusterName string `json:"clusterName"`
	// destination is where the snapshot is written.
	Destination BackupStorage `json:"destination"`
	// compression of the stored snapshot.
	// +optional
	// +kubebuilder:default=zstd
	Compression BackupCompression `json:"compression,omitempty"`
	// deletionPolicy: Retain (default) keeps the object when this EtcdBackup is deleted; Delete
	// removes it. Backups pruned by a schedule's retention are removed either way.
	// +optional
	// +kubebuilder:default=Retain
	DeletionPolicy BackupDeletionPolicy `json:"deletionPolicy,omitempty"`
	// verify restores the snapshot into a throwaway, network-isolated etcd after it is taken and
	// checks that it starts with the recorded revision (status.verification).
	// +optional
	Verify bool `json:"verify,omitempty"`
}

// BackupPhase is where a backup is; Succeeded and Failed are final.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed
type BackupPhase string

const (
	BackupPending   BackupPhase = "Pending"
	BackupRunning   BackupPhase = "Running"
	BackupSucceeded BackupPhase = "Succeeded"
	BackupFailed    BackupPhase = "Failed"
)

// EtcdBackupStatus is what the backup produced.
type EtcdBackupStatus struct {
	// phase: Pending → Running → Succeeded | Failed. Final phases never run again; create a new
	// EtcdBackup to retry.
	// +optional
	Phase BackupPhase `json:"phase,omitempty"`
	// message says why the backup waits or failed.
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// clusterUID is the UID of the EtcdCluster the backup was taken of, recorded when the backup
	// starts from the cluster it resolved. A cluster counts only backups with its own UID (status.backup,
	// BackupReady), so one recreated under the same name never inherits its predecessor's. Empty on
	// backups taken before Steward recorded it: see the Bound condition.
	// +optional
	ClusterUID types.UID `json:"clusterUID,omitempty"`
	// member the snapshot was streamed from (a follower unless the cluster has one member).
	// +optional
	Member string `json:"member,omitempty"`
	// revision is etcd's revision contained in the snapshot.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// clusterID of the etcd cluster the snapshot came from (hex).
	// +optional
	ClusterID string `json:"clusterID,omitempty"`
	// etcdVersion is the version of the member that served the snapshot.
	// +optional
	EtcdVersion string `json:"etcdVersion,omitempty"`
	// size of the stored object in bytes.
	// +optional
	Size int64 `json:"size,omitempty"`
	// sha256 of the stored object (hex); a restore refuses an object that does not match.
	// +optional
	SHA256 string `json:"sha256,omitempty"`
	// compression of the stored object.
	// +optional
	Compression BackupCompression `json:"compression,omitempty"`
	// location of the snapshot object, for example s3://bucket/prefix/ns/cluster/name/snapshot.db.zst.
	// +optional
	Location string `json:"location,omitempty"`
	// key is the object key (or the path inside the volume) of the snapshot.
	// +optional
	Key string `json:"key,omitempty"`
	// verification is the restore drill's result when spec.verify is set.
	// +optional
	Verification *BackupVerification `json:"verification,omitempty"`
	// conditions: Bound says whether the backup belongs to an EtcdCluster (reason ClusterRecorded,
	// or ClusterProven for an older backup adopted with proof) or to none (Unbound: it records no
	// cluster UID and nothing proves whose it is; no cluster counts it, it can still be restored
	// by name).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ConditionBound is the EtcdBackup condition saying which cluster the backup belongs to.
const ConditionBound = "Bound"

// BackupVerification is the result of restoring the snapshot into a throwaway etcd.
type BackupVerification struct {
	// verified is true when the restored etcd started with the recorded revision and the hashes
	// matched.
	Verified bool `json:"verified"`
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
	// durationSeconds is how long the drill took.
	// +optional
	DurationSeconds int64 `json:"durationSeconds,omitempty"`
	// revision the restored etcd reported.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// EtcdBackup is one snapshot of an EtcdCluster, streamed from a healthy follower to object
// storage by a Job running the Steward image.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=etcdbackup,categories=steward
// +kubebuilder:validation:XValidation:rule="self.spec == oldSelf.spec",message="spec is immutable: create a new EtcdBackup"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.revision`
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.status.size`
// +kubebuilder:printcolumn:name="Verified",type=boolean,JSONPath=`.status.verification.verified`
// +kubebuilder:printcolumn:name="Location",type=string,priority=1,JSONPath=`.status.location`
// +kubebuilder:printcolumn:name="Bound",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Bound")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec EtcdBackupSpec `json:"spec"`
	// +optional
	Status EtcdBackupStatus `json:"status,omitempty"`
}

// EtcdBackupList is a list of EtcdBackup.
// +kubebuilder:object:root=true
type EtcdBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdBackup `json:"items"`
}
