package backupjob

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
)

// Backup Jobs and a restored member's init containers run in the cluster's namespace, which may
// enforce Pod Security "restricted": checked with the admission plugin's own code.
func TestJobsPassRestricted(t *testing.T) {
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	vol := stewardv1.BackupStorage{Volume: &stewardv1.VolumeStorage{PersistentVolumeClaimName: "backups"}}
	inits, vols := RestoreInitContainers(Restore{Image: "steward:test", EtcdImage: "etcd:v3.6.16", Storage: s3Storage(),
		Key: "k", MountPath: "/var/lib/etcd", DataDir: "/var/lib/etcd/data", VolumeName: "data", Member: "db-0"})
	restored := corev1.PodSpec{SecurityContext: resources.RestrictedPod(), InitContainers: inits, Volumes: vols,
		Containers: []corev1.Container{{Name: "etcd", SecurityContext: resources.RestrictedContainer()}}}
	specs := map[string]*corev1.PodSpec{
		"save":        &SaveJob(base(s3Storage()), "https://demo-1:2379", &EtcdTLS{SecretName: "demo-client-tls"}, stewardv1.CompressionZstd).Spec.Template.Spec,
		"save-volume": &SaveJob(base(vol), "http://demo-1:2379", nil, stewardv1.CompressionNone).Spec.Template.Spec,
		"verify":      &VerifyJob(base(s3Storage()), "etcd:v3.6.16", "abc", 1000).Spec.Template.Spec,
		"delete":      &DeleteJob(base(s3Storage())).Spec.Template.Spec,
		"restore":     &restored,
	}
	lv := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	for name, spec := range specs {
		for _, r := range eval.EvaluatePod(lv, &metav1.ObjectMeta{}, spec) {
			if !r.Allowed {
				t.Errorf("%s: restricted refuses it: %s: %s", name, r.ForbiddenReason, r.ForbiddenDetail)
			}
		}
	}
}
