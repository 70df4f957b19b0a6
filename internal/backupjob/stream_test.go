package backupjob

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func TestClusterKey(t *testing.T) {
	s3 := func(prefix string) stewardv1.BackupStorage {
		return stewardv1.BackupStorage{S3: &stewardv1.S3Storage{Bucket: "b", Prefix: prefix}}
	}
	vol := stewardv1.BackupStorage{Volume: &stewardv1.VolumeStorage{PersistentVolumeClaimName: "c", Path: "etcd/"}}
	for _, tc := range []struct {
		storage stewardv1.BackupStorage
		want    string
	}{
		{s3(""), "ns/db"}, {s3("prod/"), "prod/ns/db"}, {s3("prod"), "prod/ns/db"}, {vol, "etcd/ns/db"},
	} {
		if got := ClusterKey(tc.storage, "ns", "db"); got != tc.want {
			t.Errorf("ClusterKey = %q, want %q", got, tc.want)
		}
		// A backup's directory is under its cluster's key: the streamer lists both together.
		if d := Dir(tc.storage, "ns", "db", "b1"); !strings.HasPrefix(d, ClusterKey(tc.storage, "ns", "db")+"/") {
			t.Errorf("backup %q is not under %q", d, tc.want)
		}
	}
}

func TestStreamDeployment(t *testing.T) {
	st := Stream{Schedule: "pitr", Namespace: "ns", Cluster: "db", Image: "steward:1",
		Storage:  stewardv1.BackupStorage{S3: &stewardv1.S3Storage{Bucket: "b", Prefix: "p/", CredentialsSecretRef: stewardv1.S3CredentialsRef{Name: "s3"}}},
		Endpoint: "https://db-client.ns.svc:2379", TLS: &EtcdTLS{SecretName: "db-client-tls"}, SegmentSeconds: 5, SegmentMaxMiB: 8}
	d := StreamDeployment(st)
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"stream ", "--prefix=p/ns/db", "--segment-interval=5s", "--segment-max-mib=8", "--listen=:8080",
		"--cacert=" + etcdTLSDir + "/ca.crt", "--s3-bucket=b"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if d.Name != "pitr-stream" || *pod.AutomountServiceAccountToken || d.Spec.Selector.MatchLabels[LabelStream] != "pitr" {
		t.Errorf("deployment %s, automount %v, selector %v", d.Name, *pod.AutomountServiceAccountToken, d.Spec.Selector)
	}
	if lim := c.Resources.Limits[corev1.ResourceMemory]; lim.Value() != (64+24)<<20 {
		t.Errorf("memory limit %s, want 88Mi", lim.String())
	}
	env := map[string]bool{}
	for _, e := range c.Env {
		env[e.Name] = e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil
	}
	if !env["AWS_ACCESS_KEY_ID"] || !env["AWS_SECRET_ACCESS_KEY"] {
		t.Errorf("credentials not from the Secret: %v", c.Env)
	}
}
