package backupjob

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// An encrypted destination: every Pod that writes or reads data mounts the key Secret's one key
// read-only and points the subcommand at it; the delete Job does not need it (a backup is deleted
// after its key is gone); the streamer's template names the sealing key so a rotation rolls it.
func TestEncryptedDestination(t *testing.T) {
	s := s3Storage()
	s.Encryption = &stewardv1.BackupEncryption{KeySecretRef: stewardv1.EncryptionKeyRef{Name: "backup-key"}}
	b := base(s)
	b.Key = SnapshotKey(s, "ns", "demo", "b1", stewardv1.CompressionZstd)
	if !strings.HasSuffix(b.Key, "/snapshot.db.zst.age") || BackupKey(b.Key) != "prod/ns/demo/b1" {
		t.Fatalf("snapshot key %s (backup key %s)", b.Key, BackupKey(b.Key))
	}
	inits, vols := RestoreInitContainers(Restore{Image: "steward:dev", EtcdImage: "etcd:v3.6.16", Storage: s, Key: b.Key,
		MountPath: "/var/lib/etcd", DataDir: "/var/lib/etcd/data", VolumeName: "data"})
	stream := StreamDeployment(Stream{Schedule: "s", Namespace: "ns", Cluster: "demo", Image: "steward:dev", Storage: s,
		Endpoint: "http://demo:2379", SegmentSeconds: 5, SegmentMaxMiB: 8, KeyID: "age1xyz"})
	pods := map[string]struct {
		spec      corev1.PodSpec
		container string
	}{
		"save":    {SaveJob(b, "https://demo-1:2379", nil, stewardv1.CompressionZstd).Spec.Template.Spec, "save"},
		"verify":  {VerifyJob(b, "etcd:v3.6.16", "abc", 1000).Spec.Template.Spec, "verify"},
		"restore": {corev1.PodSpec{InitContainers: inits, Volumes: vols}, RestoreFetchContainer},
		"stream":  {stream.Spec.Template.Spec, "stream"},
	}
	for name, p := range pods {
		var c *corev1.Container
		for i, cc := range append(p.spec.InitContainers, p.spec.Containers...) {
			if cc.Name == p.container {
				c = &append(p.spec.InitContainers, p.spec.Containers...)[i]
			}
		}
		if c == nil {
			t.Fatalf("%s: no container %s", name, p.container)
		}
		if !strings.Contains(args(*c), "--encryption-keys-file=/etc/steward/encryption/keys.txt") {
			t.Errorf("%s: args %s", name, args(*c))
		}
		mounted := false
		for _, m := range c.VolumeMounts {
			mounted = mounted || (m.Name == "encryption-keys" && m.ReadOnly && m.MountPath == "/etc/steward/encryption")
		}
		var vol *corev1.SecretVolumeSource
		for _, v := range p.spec.Volumes {
			if v.Name == "encryption-keys" {
				vol = v.Secret
			}
		}
		if !mounted || vol == nil || vol.SecretName != "backup-key" || len(vol.Items) != 1 || vol.Items[0].Key != "keys.txt" {
			t.Errorf("%s: key Secret mounted %v, volume %+v", name, mounted, vol)
		}
	}
	if got := stream.Spec.Template.Annotations[AnnotationKeyID]; got != "age1xyz" {
		t.Errorf("streamer template key annotation %q", got)
	}
	del := DeleteJob(b).Spec.Template.Spec
	if strings.Contains(args(del.Containers[0]), "encryption") || len(del.Volumes) != 1 {
		t.Errorf("delete Job reads the key: args %s, volumes %+v", args(del.Containers[0]), del.Volumes)
	}
}
