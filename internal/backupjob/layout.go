// Package backupjob builds the Pods that move snapshot data: the Job that streams a snapshot from
// a member to storage, the restore drill, the Job that deletes an object, and the init containers
// that seed a restored cluster. Pure builders: no client, no clock.
//
// Data never passes through the operator: object-store credentials are mounted only into these
// Pods (from the Secret the user names), and a Job keeps running when the operator restarts.
package backupjob

import (
	"path"
	"strings"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// Object layout: every backup is a directory of two objects, the snapshot and, written after it
// completed, its manifest (revision, cluster ID, version, size, sha256).
const (
	SnapshotFile     = "snapshot.db"
	SnapshotFileZstd = "snapshot.db.zst"
	ManifestFile     = "manifest.json"
	// SealedSuffix ends an encrypted snapshot's name (snapshot.db.zst.age).
	SealedSuffix = ".age"
)

// Dir is the backup's key, the directory of its objects: <prefix><namespace>/<cluster>/<backup>
// (prefix is the bucket prefix or the volume path). The subcommands get it whole, prefix included.
func Dir(storage stewardv1.BackupStorage, namespace, cluster, backup string) string {
	prefix := ""
	switch {
	case storage.S3 != nil:
		prefix = storage.S3.Prefix
	case storage.Volume != nil && storage.Volume.Path != "":
		prefix = strings.TrimSuffix(storage.Volume.Path, "/") + "/"
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return prefix + path.Join(namespace, cluster, backup)
}

// ClusterKey is the directory of a cluster's backups and continuous-backup segments:
// <prefix><namespace>/<cluster>, what `steward stream --prefix` and `fetch --pitr-prefix` take.
func ClusterKey(storage stewardv1.BackupStorage, namespace, cluster string) string {
	return path.Dir(Dir(storage, namespace, cluster, "x"))
}

// SnapshotKey is the snapshot object's key (or path inside the volume).
func SnapshotKey(storage stewardv1.BackupStorage, namespace, cluster, backup string, c stewardv1.BackupCompression) string {
	name := SnapshotFileZstd
	if c == stewardv1.CompressionNone {
		name = SnapshotFile
	}
	if storage.Encryption != nil {
		name += SealedSuffix
	}
	return Dir(storage, namespace, cluster, backup) + "/" + name
}

// Location is how status names an object: s3://bucket/key or pvc://claim/key.
func Location(storage stewardv1.BackupStorage, key string) string {
	if storage.S3 != nil {
		return "s3://" + storage.S3.Bucket + "/" + key
	}
	if storage.Volume != nil {
		return "pvc://" + storage.Volume.PersistentVolumeClaimName + "/" + key
	}
	return key
}

// BackupKey is the backup's key (its directory) of a snapshot object's key: restores and drills
// name the snapshot object, the subcommands its directory.
func BackupKey(objectKey string) string {
	if d, f := path.Split(objectKey); strings.TrimSuffix(f, SealedSuffix) == SnapshotFile || strings.TrimSuffix(f, SealedSuffix) == SnapshotFileZstd {
		return strings.TrimSuffix(d, "/")
	}
	return strings.TrimSuffix(objectKey, "/")
}
