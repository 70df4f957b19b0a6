package backupjob

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
)

// LabelStream marks a schedule's streamer Pods (the value is the schedule's name).
const LabelStream = "etcd.steward.dev/stream"

// StreamPort is where the streamer serves /progress (cli.StreamPort).
const StreamPort = 8080

// Stream is a schedule's continuous backup: one streamer for one cluster.
type Stream struct {
	Schedule, Namespace, Cluster string
	Image                        string
	Storage                      stewardv1.BackupStorage
	// Endpoint is the cluster's client Service URL; TLS its client Secret, when TLS is on.
	Endpoint       string
	TLS            *EtcdTLS
	SegmentSeconds int32
	SegmentMaxMiB  int32
	// KeyID is the sealing key's public ID (backupkey.Check) when the destination is encrypted:
	// on the Pod template, so a rotated key rolls the streamer, which reads its keys at start.
	KeyID string
	Owner *metav1.OwnerReference
}

// AnnotationKeyID on the streamer's Pod template is the key it seals with.
const AnnotationKeyID = "etcd.steward.dev/encryption-key-id"

// StreamName is the streamer Deployment's name.
func StreamName(schedule string) string { return schedule + "-stream" }

// StreamDeployment runs `steward stream` for a schedule: one replica, replaced Recreate-style so
// two streamers never write the same chain (the second would only rewrite the same revisions, but
// one writer keeps the segments simple to follow). It has no Kubernetes credentials: the operator
// reads its /progress.
func StreamDeployment(s Stream) *appsv1.Deployment {
	args := []string{"stream", "--endpoint=" + s.Endpoint, "--prefix=" + ClusterKey(s.Storage, s.Namespace, s.Cluster),
		"--segment-interval=" + strconv.Itoa(int(s.SegmentSeconds)) + "s", "--segment-max-mib=" + strconv.Itoa(int(s.SegmentMaxMiB)),
		fmt.Sprintf("--listen=:%d", StreamPort)}
	args = append(args, storageArgs(s.Storage)...)
	c := container("stream", s.Image, args, s.Storage)
	vols := storageVolumes(s.Storage)
	if s.TLS != nil {
		c.Args = append(c.Args, "--cacert="+etcdTLSDir+"/ca.crt", "--cert="+etcdTLSDir+"/tls.crt", "--key="+etcdTLSDir+"/tls.key")
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "etcd-tls", MountPath: etcdTLSDir, ReadOnly: true})
		vols = append(vols, secretVolume("etcd-tls", s.TLS.SecretName, nil))
	}
	c.Ports = []corev1.ContainerPort{{Name: "progress", ContainerPort: StreamPort}}
	c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	// A segment is at most segmentMaxMiB in memory, twice while it uploads.
	mem := resource.NewQuantity(int64(64+3*s.SegmentMaxMiB)<<20, resource.BinarySI)
	c.Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: *mem},
	}
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/progress",
		Port: intOrPort(StreamPort)}}, PeriodSeconds: 5}
	labels := map[string]string{LabelStream: s.Schedule, stewardv1.LabelBackupOf: s.Cluster, "app.kubernetes.io/managed-by": "steward"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: StreamName(s.Schedule), Namespace: s.Namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelStream: s.Schedule}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: keyAnnotation(s.KeyID)},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{c}, Volumes: vols,
					AutomountServiceAccountToken: ptr.To(false), EnableServiceLinks: ptr.To(false),
					SecurityContext: resources.RestrictedPod(),
					// A stop uploads what the streamer holds (up to 20 s against a slow store).
					TerminationGracePeriodSeconds: ptr.To[int64](30),
				},
			},
		},
	}
	if s.Owner != nil {
		d.OwnerReferences = []metav1.OwnerReference{*s.Owner}
	}
	return d
}

func intOrPort(p int) intstr.IntOrString { return intstr.FromInt32(int32(p)) }

func keyAnnotation(keyID string) map[string]string {
	if keyID == "" {
		return nil
	}
	return map[string]string{AnnotationKeyID: keyID}
}
