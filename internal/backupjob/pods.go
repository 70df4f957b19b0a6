package backupjob

import (
	"fmt"
	"path"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/backupkey"
	"github.com/etcd-steward/steward/internal/resources"
)

// Tasks a Job performs.
const (
	TaskSave   = "save"
	TaskVerify = "verify"
	TaskDrill  = "drill"
	TaskDelete = "delete"
)

// Mount paths inside the data-moving containers.
const (
	etcdTLSDir  = "/etc/steward/etcd-tls"
	s3CADir     = "/etc/steward/s3-ca"
	keysDir     = "/etc/steward/encryption"
	volumeDir   = "/backup"
	toolsDir    = "/tools"
	workDir     = "/work"
	resultFile  = "/dev/termination-log"
	jobDeadline = 30 * 60
)

// EtcdTLS is the client Secret the snapshot stream authenticates with (tls.crt, tls.key, ca.crt).
type EtcdTLS struct{ SecretName string }

// Job is what every data-moving Job needs.
type Job struct {
	Name      string
	Namespace string
	Backup    string
	Cluster   string
	// Image is the Steward image (its binary holds the snapshot subcommands).
	Image   string
	Storage stewardv1.BackupStorage
	Key     string
	Owner   *metav1.OwnerReference
}

// SaveJob streams a snapshot from endpoint (one member's client URL) to storage.
func SaveJob(j Job, endpoint string, tls *EtcdTLS, compression stewardv1.BackupCompression) *batchv1.Job {
	args := []string{"snapshot", "save", "--endpoint=" + endpoint, "--backup-key=" + BackupKey(j.Key),
		"--namespace=" + j.Namespace, "--cluster=" + j.Cluster, "--backup=" + j.Backup,
		"--compression=" + string(compression), "--result-file=" + resultFile}
	args = append(args, storageArgs(j.Storage)...)
	c := container("save", j.Image, args, j.Storage)
	vols := storageVolumes(j.Storage)
	if tls != nil {
		c.Args = append(c.Args, "--cacert="+etcdTLSDir+"/ca.crt", "--cert="+etcdTLSDir+"/tls.crt", "--key="+etcdTLSDir+"/tls.key")
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "etcd-tls", MountPath: etcdTLSDir, ReadOnly: true})
		vols = append(vols, secretVolume("etcd-tls", tls.SecretName, nil))
	}
	return job(j, TaskSave, corev1.PodSpec{Containers: []corev1.Container{c}, Volumes: vols}, 1)
}

// VerifyJob is the restore drill: the Steward binary is copied into an etcd image, which restores
// the snapshot into a throwaway etcd bound to loopback and checks its revision and hash.
func VerifyJob(j Job, etcdImage, sha256 string, bump int64) *batchv1.Job {
	args := []string{"snapshot", "verify", "--backup-key=" + BackupKey(j.Key), "--expect-sha256=" + sha256}
	return drillJob(j, TaskVerify, etcdImage, args, bump, nil)
}

// ChainDrillJob drills a schedule's chain (j.Key is the cluster's key, ClusterKey): a random
// revision the live cluster still holds, replayed and restored as VerifyJob restores, its whole
// keyspace compared with the live cluster's (endpoint, the client Service) at that revision.
func ChainDrillJob(j Job, etcdImage, endpoint string, tls *EtcdTLS, bump int64) *batchv1.Job {
	args := []string{"snapshot", "verify", "--pitr-prefix=" + j.Key, "--to-random-revision", "--endpoint=" + endpoint}
	return drillJob(j, TaskDrill, etcdImage, args, bump, tls)
}

func drillJob(j Job, task, etcdImage string, args []string, bump int64, tls *EtcdTLS) *batchv1.Job {
	install := container("install", j.Image, []string{"install-self", toolsDir + "/steward"}, stewardv1.BackupStorage{})
	install.VolumeMounts = []corev1.VolumeMount{{Name: "tools", MountPath: toolsDir}}
	args = append(args, "--bump-revision="+strconv.FormatInt(bump, 10), "--work-dir="+workDir,
		"--etcd=/usr/local/bin/etcd", "--etcdutl=/usr/local/bin/etcdutl", "--result-file="+resultFile)
	args = append(args, storageArgs(j.Storage)...)
	c := container(task, etcdImage, args, j.Storage)
	c.Command = []string{toolsDir + "/steward"}
	c.VolumeMounts = append(c.VolumeMounts,
		corev1.VolumeMount{Name: "tools", MountPath: toolsDir, ReadOnly: true},
		corev1.VolumeMount{Name: "work", MountPath: workDir})
	vols := append(storageVolumes(j.Storage),
		corev1.Volume{Name: "tools", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	if tls != nil {
		c.Args = append(c.Args, "--cacert="+etcdTLSDir+"/ca.crt", "--cert="+etcdTLSDir+"/tls.crt", "--key="+etcdTLSDir+"/tls.key")
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "etcd-tls", MountPath: etcdTLSDir, ReadOnly: true})
		vols = append(vols, secretVolume("etcd-tls", tls.SecretName, nil))
	}
	return job(j, task, corev1.PodSpec{InitContainers: []corev1.Container{install}, Containers: []corev1.Container{c}, Volumes: vols}, 0)
}

// DeleteJob removes the backup's objects (snapshot and manifest). It needs no key: a backup is
// deleted even after its key Secret is gone.
func DeleteJob(j Job) *batchv1.Job {
	j.Storage.Encryption = nil
	args := append([]string{"snapshot", "delete", "--backup-key=" + BackupKey(j.Key), "--result-file=" + resultFile}, storageArgs(j.Storage)...)
	c := container("delete", j.Image, args, j.Storage)
	return job(j, TaskDelete, corev1.PodSpec{Containers: []corev1.Container{c}, Volumes: storageVolumes(j.Storage)}, 2)
}

func job(j Job, task string, spec corev1.PodSpec, retries int32) *batchv1.Job {
	labels := map[string]string{stewardv1.LabelBackup: j.Backup, stewardv1.LabelBackupOf: j.Cluster, stewardv1.LabelBackupTask: task,
		"app.kubernetes.io/managed-by": "steward"}
	spec.RestartPolicy = corev1.RestartPolicyNever
	spec.AutomountServiceAccountToken = ptr.To(false)
	spec.EnableServiceLinks = ptr.To(false)
	spec.SecurityContext = resources.RestrictedPod()
	jb := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: j.Name, Namespace: j.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To(retries),
			ActiveDeadlineSeconds:   ptr.To[int64](jobDeadline),
			TTLSecondsAfterFinished: ptr.To[int32](3600),
			Template:                corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	if j.Owner != nil {
		jb.OwnerReferences = []metav1.OwnerReference{*j.Owner}
	}
	return jb
}

// container runs the Steward binary with the object-store credentials as environment variables,
// mapped from the user's Secret: they exist only in this container.
func container(name, image string, args []string, s stewardv1.BackupStorage) corev1.Container {
	c := corev1.Container{
		Name: name, Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
		Command:                  []string{"/steward"},
		Args:                     args,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		Resources:                corev1.ResourceRequirements{Requests: corev1.ResourceList{}},
		SecurityContext:          resources.RestrictedContainer(),
	}
	if s.S3 != nil {
		ref := s.S3.CredentialsSecretRef
		c.Env = append(c.Env, secretEnv("AWS_ACCESS_KEY_ID", ref.Name, ref.AccessKeyIDKey, false),
			secretEnv("AWS_SECRET_ACCESS_KEY", ref.Name, ref.SecretAccessKeyKey, false))
		if ref.SessionTokenKey != "" {
			c.Env = append(c.Env, secretEnv("AWS_SESSION_TOKEN", ref.Name, ref.SessionTokenKey, true))
		}
		if s.S3.CABundleSecretRef != nil {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "s3-ca", MountPath: s3CADir, ReadOnly: true})
		}
	}
	if s.Volume != nil {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "backup", MountPath: volumeDir})
	}
	if s.Encryption != nil {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "encryption-keys", MountPath: keysDir, ReadOnly: true})
	}
	return c
}

func secretEnv(name, secret, key string, optional bool) corev1.EnvVar {
	if key == "" {
		key = map[string]string{"AWS_ACCESS_KEY_ID": "accessKeyID", "AWS_SECRET_ACCESS_KEY": "secretAccessKey"}[name]
	}
	sel := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}
	if optional {
		sel.Optional = ptr.To(true)
	}
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: sel}}
}

// storageArgs are the destination flags of the snapshot subcommands.
func storageArgs(s stewardv1.BackupStorage) []string {
	var keys []string
	if s.Encryption != nil {
		keys = []string{"--encryption-keys-file=" + path.Join(keysDir, backupkey.KeyName(s.Encryption.KeySecretRef))}
	}
	switch {
	case s.S3 != nil:
		args := []string{"--s3-bucket=" + s.S3.Bucket, "--s3-region=" + s.S3.Region}
		if s.S3.Endpoint != "" {
			args = append(args, "--s3-endpoint="+s.S3.Endpoint)
		}
		if s.S3.ForcePathStyle {
			args = append(args, "--s3-force-path-style")
		}
		if s.S3.CABundleSecretRef != nil {
			args = append(args, "--s3-ca-file="+path.Join(s3CADir, caKey(s.S3.CABundleSecretRef)))
		}
		return append(args, keys...)
	case s.Volume != nil:
		return append([]string{"--volume-dir=" + volumeDir}, keys...)
	}
	return nil
}

func storageVolumes(s stewardv1.BackupStorage) []corev1.Volume {
	var vols []corev1.Volume
	if s.S3 != nil && s.S3.CABundleSecretRef != nil {
		vols = append(vols, secretVolume("s3-ca", s.S3.CABundleSecretRef.Name, []string{caKey(s.S3.CABundleSecretRef)}))
	}
	if s.Volume != nil {
		vols = append(vols, corev1.Volume{Name: "backup", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: s.Volume.PersistentVolumeClaimName}}})
	}
	if e := s.Encryption; e != nil {
		vols = append(vols, secretVolume("encryption-keys", e.KeySecretRef.Name, []string{backupkey.KeyName(e.KeySecretRef)}))
	}
	return vols
}

func caKey(r *stewardv1.SecretKeyRef) string {
	if r.Key == "" {
		return "ca.crt"
	}
	return r.Key
}

func secretVolume(name, secret string, keys []string) corev1.Volume {
	src := &corev1.SecretVolumeSource{SecretName: secret, DefaultMode: ptr.To[int32](0o440)}
	for _, k := range keys {
		src.Items = append(src.Items, corev1.KeyToPath{Key: k, Path: k})
	}
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: src}}
}

// JobName is a Job's name for a backup task, kept within the 63 characters a label value allows.
func JobName(backup, task string) string {
	name := backup + "-" + task
	if len(name) <= 63 {
		return name
	}
	return fmt.Sprintf("%s-%s", backup[:63-len(task)-1], task)
}
