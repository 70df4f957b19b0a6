package backupjob

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func s3Storage() stewardv1.BackupStorage {
	return stewardv1.BackupStorage{S3: &stewardv1.S3Storage{Bucket: "b", Endpoint: "http://s3:7070", Region: "us-east-1", ForcePathStyle: true,
		Prefix:               "prod/",
		CredentialsSecretRef: stewardv1.S3CredentialsRef{Name: "creds", AccessKeyIDKey: "id", SecretAccessKeyKey: "secret", SessionTokenKey: "token"},
		CABundleSecretRef:    &stewardv1.SecretKeyRef{Name: "ca", Key: "bundle.pem"}}}
}

func base(s stewardv1.BackupStorage) Job {
	return Job{Name: "b1-save", Namespace: "ns", Backup: "b1", Cluster: "demo", Image: "steward:dev", Storage: s, Key: "ns/demo/b1"}
}

func args(c corev1.Container) string { return strings.Join(c.Args, " ") }

// TestCredentialsOnlyFromTheSecret: the Pods get the object-store credentials as references to
// the user's Secret, never as values, and the operator's own service account is not mounted.
func TestCredentialsOnlyFromTheSecret(t *testing.T) {
	jobs := map[string]*corev1.PodSpec{
		"save":   &SaveJob(base(s3Storage()), "https://demo-1:2379", &EtcdTLS{SecretName: "demo-client-tls"}, stewardv1.CompressionZstd).Spec.Template.Spec,
		"verify": &VerifyJob(base(s3Storage()), "etcd:v3.6.16", "abc", 1000).Spec.Template.Spec,
		"delete": &DeleteJob(base(s3Storage())).Spec.Template.Spec,
	}
	for name, spec := range jobs {
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			t.Errorf("%s: the service account token is mounted", name)
		}
		if spec.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("%s: restartPolicy %s", name, spec.RestartPolicy)
		}
		c := spec.Containers[len(spec.Containers)-1]
		env := map[string]corev1.EnvVar{}
		for _, e := range c.Env {
			env[e.Name] = e
			if e.Value != "" {
				t.Errorf("%s: env %s has a literal value", name, e.Name)
			}
		}
		for v, key := range map[string]string{"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "token"} {
			ref := env[v].ValueFrom
			if ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != "creds" || ref.SecretKeyRef.Key != key {
				t.Errorf("%s: %s = %+v, want key %q of Secret creds", name, v, env[v], key)
			}
		}
		if !strings.Contains(args(c), "--s3-ca-file=/etc/steward/s3-ca/bundle.pem") || !strings.Contains(args(c), "--s3-force-path-style") {
			t.Errorf("%s: args %s", name, args(c))
		}
		if strings.Contains(args(c), "secret") {
			t.Errorf("%s: args mention a secret: %s", name, args(c))
		}
	}
}

func TestSaveJob(t *testing.T) {
	job := SaveJob(base(s3Storage()), "https://demo-1.demo.ns.svc:2379", &EtcdTLS{SecretName: "demo-client-tls"}, stewardv1.CompressionNone)
	if job.Labels[stewardv1.LabelBackup] != "b1" || job.Labels[stewardv1.LabelBackupOf] != "demo" || job.Labels[stewardv1.LabelBackupTask] != TaskSave {
		t.Errorf("labels %v", job.Labels)
	}
	if _, member := job.Spec.Template.Labels["etcd.steward.dev/cluster"]; member {
		t.Error("a backup Pod carries the member label: the cluster controller would take it for a member")
	}
	c := job.Spec.Template.Spec.Containers[0]
	for _, want := range []string{"snapshot save", "--endpoint=https://demo-1.demo.ns.svc:2379", "--compression=none",
		"--cacert=/etc/steward/etcd-tls/ca.crt", "--result-file=/dev/termination-log"} {
		if !strings.Contains(args(c), want) {
			t.Errorf("args %q lack %q", args(c), want)
		}
	}
	if *job.Spec.BackoffLimit != 1 {
		t.Errorf("backoffLimit %d: a Pod killed mid-upload should be retried once", *job.Spec.BackoffLimit)
	}
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Error("the save container's root filesystem is writable")
	}
	plain := SaveJob(base(s3Storage()), "http://demo-1:2379", nil, stewardv1.CompressionZstd)
	if strings.Contains(args(plain.Spec.Template.Spec.Containers[0]), "--cacert") {
		t.Error("a plaintext cluster's Job presents TLS files")
	}
}

func TestVolumeDestination(t *testing.T) {
	vol := stewardv1.BackupStorage{Volume: &stewardv1.VolumeStorage{PersistentVolumeClaimName: "backups", Path: "etcd"}}
	spec := SaveJob(base(vol), "http://demo-1:2379", nil, stewardv1.CompressionZstd).Spec.Template.Spec
	if len(spec.Volumes) != 1 || spec.Volumes[0].PersistentVolumeClaim == nil || spec.Volumes[0].PersistentVolumeClaim.ClaimName != "backups" {
		t.Fatalf("volumes %+v", spec.Volumes)
	}
	c := spec.Containers[0]
	if len(c.Env) != 0 {
		t.Errorf("a volume destination gets credentials: %+v", c.Env)
	}
	if !strings.Contains(args(c), "--volume-dir=/backup") || strings.Contains(args(c), "--s3-") {
		t.Errorf("args %s", args(c))
	}
}

func TestVerifyRunsInTheEtcdImage(t *testing.T) {
	spec := VerifyJob(base(s3Storage()), "etcd:v3.6.16", "abc", 1000).Spec.Template.Spec
	if len(spec.InitContainers) != 1 || spec.InitContainers[0].Image != "steward:dev" {
		t.Fatalf("init containers %+v", spec.InitContainers)
	}
	c := spec.Containers[0]
	if c.Image != "etcd:v3.6.16" || c.Command[0] != "/tools/steward" {
		t.Errorf("verify container %s %v", c.Image, c.Command)
	}
	for _, want := range []string{"snapshot verify", "--expect-sha256=abc", "--bump-revision=1000", "--etcdutl=/usr/local/bin/etcdutl"} {
		if !strings.Contains(args(c), want) {
			t.Errorf("args %q lack %q", args(c), want)
		}
	}
}

func TestRestoreInitContainers(t *testing.T) {
	inits, vols := RestoreInitContainers(Restore{Image: "steward:dev", EtcdImage: "etcd:v3.6.16", Storage: s3Storage(),
		Key: "prod/ns/demo/b1/snapshot.db.zst", SHA256: "abc", MaxMinor: "3.6", Member: "demo-0",
		PeerURL: "https://demo-0.demo.ns.svc:2380", InitialCluster: "demo-0=https://demo-0.demo.ns.svc:2380",
		Token: "demo-uid", Bump: 1_000_000_000, MountPath: "/var/lib/etcd", DataDir: "/var/lib/etcd/data", VolumeName: "data"})
	if len(inits) != 3 || inits[0].Name != "restore-install" || inits[1].Name != "restore-fetch" || inits[2].Name != "restore" {
		t.Fatalf("init containers %+v", inits)
	}
	fetch := args(inits[1])
	for _, want := range []string{"snapshot fetch", "--skip-if-exists=/var/lib/etcd/data/member", "--expect-sha256=abc", "--max-minor=3.6"} {
		if !strings.Contains(fetch, want) {
			t.Errorf("fetch args %q lack %q", fetch, want)
		}
	}
	// etcd's images are distroless: nothing may need a shell in them.
	restore := inits[2]
	if restore.Image != "etcd:v3.6.16" || restore.Command[0] != "/tools/steward" {
		t.Errorf("restore runs %s %v, want the Steward binary in the member's own etcd image (its etcdutl)", restore.Image, restore.Command)
	}
	for _, want := range []string{"snapshot restore", "--data-dir=/var/lib/etcd/data", "--stage=/var/lib/etcd/restore",
		"--bump-revision=1000000000", "--etcdutl=/usr/local/bin/etcdutl", "--initial-cluster-token=demo-uid"} {
		if !strings.Contains(args(restore), want) {
			t.Errorf("restore args %q lack %q", args(restore), want)
		}
	}
	if len(vols) != 2 || vols[0].Secret == nil || vols[0].Secret.SecretName != "ca" || vols[1].EmptyDir == nil {
		t.Errorf("volumes %+v", vols)
	}
}

func TestRestoreInitContainersToAPoint(t *testing.T) {
	r := Restore{Image: "steward:dev", EtcdImage: "etcd:v3.6.16", Storage: s3Storage(), MaxMinor: "3.6",
		PointInTime: &PointInTime{Prefix: "prod/ns/demo", ToRevision: 4242}, MountPath: "/var/lib/etcd", DataDir: "/var/lib/etcd/data", VolumeName: "data"}
	inits, _ := RestoreInitContainers(r)
	fetch := args(inits[1])
	for _, want := range []string{"snapshot fetch", "--pitr-prefix=prod/ns/demo", "--to-revision=4242", "--max-minor=3.6", "--skip-if-exists="} {
		if !strings.Contains(fetch, want) {
			t.Errorf("fetch args %q lack %q", fetch, want)
		}
	}
	if strings.Contains(fetch, "--backup-key") || strings.Contains(fetch, "--to-time") {
		t.Errorf("fetch args %q: a point-in-time restore names no backup and one target", fetch)
	}
	r.PointInTime = &PointInTime{Prefix: "prod/ns/demo", ToTime: "2026-12-04T14:02:10Z"}
	inits, _ = RestoreInitContainers(r)
	if fetch := args(inits[1]); !strings.Contains(fetch, "--to-time=2026-12-04T14:02:10Z") || strings.Contains(fetch, "--to-revision") {
		t.Errorf("fetch args %q", fetch)
	}
}

func TestJobNameFitsALabel(t *testing.T) {
	long := strings.Repeat("x", 70)
	if n := JobName(long, TaskVerify); len(n) > 63 || !strings.HasSuffix(n, "-verify") {
		t.Errorf("JobName = %q (%d)", n, len(n))
	}
	if n := JobName("b1", TaskSave); n != "b1-save" {
		t.Errorf("JobName = %q", n)
	}
}

func TestJobsSerialize(t *testing.T) {
	if _, err := json.Marshal(SaveJob(base(s3Storage()), "e", nil, stewardv1.CompressionZstd)); err != nil {
		t.Fatal(err)
	}
}
