package backupjob

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// Restore is what the seed of a restored cluster needs to build its data directory.
type Restore struct {
	// Image is the Steward image (fetch); EtcdImage the member's own image (etcdutl of the target
	// version).
	Image, EtcdImage string
	Storage          v1.BackupStorage
	Key              string
	// SHA256 is the expected hash of the stored object ("" trusts the manifest next to it).
	SHA256 string
	// MaxMinor refuses snapshots taken by a newer etcd minor ("3.6").
	MaxMinor string
	// Member, PeerURL, InitialCluster and Token are the seed's identity, as etcd's flags give it.
	Member, PeerURL, InitialCluster, Token string
	Bump                                   int64
	// MountPath is where the member's data volume is mounted; etcd's data dir is DataDir.
	MountPath, DataDir string
	VolumeName         string
}

// restoreScript runs in the etcd image. It never touches a data directory that holds a member
// (an operator restart or a recreated Pod must not restore twice over live data), restores into
// a scratch directory and moves it into place only when etcdutl succeeded, so a crash leaves no
// half-restored member.
const restoreScript = `set -eu
stage="$MOUNT/restore"
if [ -d "$DATA/member" ]; then
  echo "data directory $DATA holds a member: nothing to restore"
  rm -rf "$stage"
  exit 0
fi
rm -rf "$stage/data"
etcdutl snapshot restore "$stage/snapshot.db" --data-dir "$stage/data" --name "$NAME" \
  --initial-cluster "$INITIAL_CLUSTER" --initial-cluster-token "$TOKEN" \
  --initial-advertise-peer-urls "$PEER_URL" --bump-revision "$BUMP" --mark-compacted
rm -rf "$DATA"
mv "$stage/data" "$DATA"
rm -rf "$stage"
echo "restored $NAME from the snapshot"
`

// RestoreInitContainers fetch and check the snapshot (Steward image), then restore it with the
// target version's etcdutl (etcd image). Both skip when the data directory already holds a member.
func RestoreInitContainers(r Restore) ([]corev1.Container, []corev1.Volume) {
	stage := r.MountPath + "/restore"
	args := []string{"snapshot", "fetch", "--backup-key=" + BackupKey(r.Key), "--out=" + stage + "/snapshot.db",
		"--skip-if-exists=" + r.DataDir + "/member", "--result-file=" + resultFile}
	if r.SHA256 != "" {
		args = append(args, "--expect-sha256="+r.SHA256)
	}
	if r.MaxMinor != "" {
		args = append(args, "--max-minor="+r.MaxMinor)
	}
	args = append(args, storageArgs(r.Storage)...)
	fetch := container("restore-fetch", r.Image, args, r.Storage)
	// The member's volume belongs to root (etcd's image runs as root).
	fetch.SecurityContext.RunAsUser = ptr.To[int64](0)
	fetch.SecurityContext.RunAsNonRoot = ptr.To(false)
	data := corev1.VolumeMount{Name: r.VolumeName, MountPath: r.MountPath}
	fetch.VolumeMounts = append(fetch.VolumeMounts, data)

	restore := corev1.Container{
		Name: "restore", Image: r.EtcdImage, ImagePullPolicy: corev1.PullIfNotPresent,
		Command:                  []string{"/bin/sh", "-c", restoreScript},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		Env: []corev1.EnvVar{
			{Name: "MOUNT", Value: r.MountPath}, {Name: "DATA", Value: r.DataDir},
			{Name: "NAME", Value: r.Member}, {Name: "INITIAL_CLUSTER", Value: r.InitialCluster},
			{Name: "TOKEN", Value: r.Token}, {Name: "PEER_URL", Value: r.PeerURL},
			{Name: "BUMP", Value: strconv.FormatInt(r.Bump, 10)},
			// etcdutl reads ETCDUTL_* variables as flags; keep the environment clean of others.
		},
		VolumeMounts: []corev1.VolumeMount{data},
	}
	return []corev1.Container{fetch, restore}, storageVolumes(r.Storage)
}
