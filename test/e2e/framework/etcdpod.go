package framework

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/etcd-steward/steward/internal/resources"
)

// EtcdSet describes a hand-made etcd cluster: Pods <Name>-0..N-1 behind a headless
// Service <Name>, each with an emptyDir. It exists so the framework (client, traffic,
// monitor) can be tested against real etcd without the operator; it is deliberately
// naive (no recreation, no membership changes).
type EtcdSet struct {
	Namespace string
	Name      string
	Replicas  int
	Image     string
}

// Labels select the set's Pods.
func (s EtcdSet) Labels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": "e2e-etcd", "app.kubernetes.io/instance": s.Name}
}

// MemberNames are the Pod names, which are also the etcd member names.
func (s EtcdSet) MemberNames() []string {
	names := make([]string, s.Replicas)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", s.Name, i)
	}
	return names
}

// peerURL uses the Pod's DNS name (hostname.subdomain), as the operator does.
func (s EtcdSet) peerURL(member string) string {
	return fmt.Sprintf("http://%s.%s.%s.svc:2380", member, s.Name, s.Namespace)
}

// Service is the headless Service that gives members DNS names. Not-ready addresses are
// published: members must resolve each other before any of them can become Ready.
func (s EtcdSet) Service() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Labels: s.Labels()},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 s.Labels(),
			Ports: []corev1.ServicePort{
				{Name: "client", Port: 2379, TargetPort: intstr.FromInt32(2379)},
				{Name: "peer", Port: 2380, TargetPort: intstr.FromInt32(2380)},
			},
		},
	}
}

// Pods are the member Pods, all bootstrapping together (initial-cluster-state new).
func (s EtcdSet) Pods() []*corev1.Pod {
	var initial []string
	for _, m := range s.MemberNames() {
		initial = append(initial, m+"="+s.peerURL(m))
	}
	pods := make([]*corev1.Pod, 0, s.Replicas)
	for _, m := range s.MemberNames() {
		pods = append(pods, s.pod(m, strings.Join(initial, ",")))
	}
	return pods
}

func (s EtcdSet) pod(member, initialCluster string) *corev1.Pod {
	zero := int64(0)
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: member, Labels: s.Labels()},
		Spec: corev1.PodSpec{
			Hostname:  member,
			Subdomain: s.Name,
			// Killed members are the point of these tests; no need to wait for them.
			TerminationGracePeriodSeconds: &zero,
			// The e2e namespaces enforce Pod Security "restricted".
			SecurityContext: resources.RestrictedPod(),
			Containers: []corev1.Container{{
				Name:            "etcd",
				Image:           s.Image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				SecurityContext: resources.RestrictedContainer(),
				Command: []string{"etcd",
					"--name=" + member,
					"--data-dir=/var/lib/etcd/data",
					"--listen-client-urls=http://0.0.0.0:2379",
					"--advertise-client-urls=http://$(POD_IP):2379",
					"--listen-peer-urls=http://0.0.0.0:2380",
					"--initial-advertise-peer-urls=" + s.peerURL(member),
					"--initial-cluster=" + initialCluster,
					"--initial-cluster-state=new",
					"--initial-cluster-token=" + s.Namespace + "-" + s.Name,
				},
				Env: []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
				Ports: []corev1.ContainerPort{{Name: "client", ContainerPort: 2379}, {Name: "peer", ContainerPort: 2380}},
				// /health fails without a leader, so Ready means "serves requests".
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(2379)}},
					PeriodSeconds: 1, FailureThreshold: 2, TimeoutSeconds: 1,
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
}
