package backupjob

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
)

// Restore is what the seed of a restored cluster needs to build its data directory.
type Restore struct {
	// Image is the Steward image (fetch); EtcdImage the member's own image (etcdutl of the target
	// version).
	Image, EtcdImage string
	Storage          stewardv1.BackupStorage
	Key              string
	// SHA256 is the expected hash of the stored object ("" trusts the manifest next to it).
	SHA256 string
	// PointInTime, when set, restores a cluster's chain to a point instead of the snapshot at Key.
	PointInTime *PointInTime
	// MaxMinor refuses snapshots taken by a newer etcd minor ("3.6").
	MaxMinor string
	// Member, PeerURL, InitialCluster and Token are the seed's identity, as etcd's flags give it.
	Member, PeerURL, InitialCluster, Token string
	Bump                                   int64
	// MountPath is where the member's data volume is mounted; etcd's data dir is DataDir.
	MountPath, DataDir string
	VolumeName         string
}

// PointInTime is a point-in-time restore's target: the chain under Prefix (ClusterKey), replayed
// to ToRevision or to the last revision stamped at or before ToTime (RFC 3339).
type PointInTime struct {
	Prefix     string
	ToRevision int64
	ToTime     string
}

// The restore init containers' names: the controller reads the fetch's result (the revision a time
// target chose) and both containers' failures from the Pod's status by these names.
const (
	RestoreFetchContainer = "restore-fetch"
	RestoreContainer      = "restore"
)

// RestoreInitContainers fetch and check the snapshot (Steward image), then restore it with the
// target version's etcdutl (etcd image). Both skip when the data directory already holds a member.
func RestoreInitContainers(r Restore) ([]corev1.Container, []corev1.Volume) {
	stage := r.MountPath + "/restore"
	args := []string{"snapshot", "fetch", "--out=" + stage + "/snapshot.db",
		"--skip-if-exists=" + r.DataDir + "/member", "--result-file=" + resultFile}
	switch p := r.PointInTime; {
	case p == nil:
		args = append(args, "--backup-key="+BackupKey(r.Key))
	case p.ToTime != "":
		args = append(args, "--pitr-prefix="+p.Prefix, "--to-time="+p.ToTime)
	default:
		args = append(args, "--pitr-prefix="+p.Prefix, "--to-revision="+strconv.FormatInt(p.ToRevision, 10))
	}
	if r.SHA256 != "" {
		args = append(args, "--expect-sha256="+r.SHA256)
	}
	if r.MaxMinor != "" {
		args = append(args, "--max-minor="+r.MaxMinor)
	}
	args = append(args, storageArgs(r.Storage)...)
	fetch := container(RestoreFetchContainer, r.Image, args, r.Storage)
	data := corev1.VolumeMount{Name: r.VolumeName, MountPath: r.MountPath}
	fetch.VolumeMounts = append(fetch.VolumeMounts, data)

	// The etcd image is distroless (no shell): the Steward binary, copied in by install, runs
	// etcdutl there and does the guard and the rename (snapshot.RestoreLocal).
	install := container("restore-install", r.Image, []string{"install-self", toolsDir + "/steward"}, stewardv1.BackupStorage{})
	install.VolumeMounts = []corev1.VolumeMount{{Name: "restore-tools", MountPath: toolsDir}}
	restore := corev1.Container{
		Name: RestoreContainer, Image: r.EtcdImage, ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{toolsDir + "/steward"},
		Args: []string{"snapshot", "restore", "--snapshot=" + stage + "/snapshot.db", "--stage=" + stage,
			"--data-dir=" + r.DataDir, "--name=" + r.Member, "--initial-cluster=" + r.InitialCluster,
			"--initial-cluster-token=" + r.Token, "--initial-advertise-peer-urls=" + r.PeerURL,
			"--bump-revision=" + strconv.FormatInt(r.Bump, 10), "--etcdutl=/usr/local/bin/etcdutl"},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          resources.RestrictedContainer(),
		VolumeMounts:             []corev1.VolumeMount{data, {Name: "restore-tools", MountPath: toolsDir, ReadOnly: true}},
	}
	vols := append(storageVolumes(r.Storage),
		corev1.Volume{Name: "restore-tools", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	return []corev1.Container{install, fetch, restore}, vols
}
