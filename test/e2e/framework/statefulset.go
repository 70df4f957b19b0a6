package framework

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/etcd-steward/steward/internal/resources"
)

// StatefulSet is the baseline Steward is compared with (docs/performance.md): the same etcd as a
// plain StatefulSet with PVCs, plaintext, the probes Steward gives its members, and a client Service
// <Name>-client. A rolling restart is a template change; the StatefulSet controller then replaces
// Pods from the highest ordinal, each once the previous is Ready. No leader handoff, no drain, no
// health gate beyond readiness: what a hand-written manifest gets.
func (s EtcdSet) StatefulSet() *appsv1.StatefulSet {
	var initial []string
	for _, m := range s.MemberNames() {
		initial = append(initial, m+"="+s.peerURL(m))
	}
	host := fmt.Sprintf("$(POD_NAME).%s.%s.svc", s.Name, s.Namespace)
	probe := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(2381)}},
			PeriodSeconds: period, TimeoutSeconds: min(period*2, 3), FailureThreshold: failures}
	}
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Labels: s.Labels()},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(int32(s.Replicas)),
			ServiceName:         s.Name,
			PodManagementPolicy: appsv1.ParallelPodManagement, // members must start together to bootstrap
			Selector:            &metav1.LabelSelector{MatchLabels: s.Labels()},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: s.Labels()},
				Spec: corev1.PodSpec{
					// As Steward's members: the e2e namespaces enforce Pod Security "restricted".
					SecurityContext: resources.RestrictedPod(),
					Containers: []corev1.Container{{
						Name: "etcd", Image: s.Image, ImagePullPolicy: corev1.PullIfNotPresent,
						SecurityContext: resources.RestrictedContainer(),
						Command: []string{"etcd", "--name=$(POD_NAME)", "--data-dir=/var/lib/etcd/data",
							"--listen-client-urls=http://0.0.0.0:2379", "--advertise-client-urls=http://" + host + ":2379",
							"--listen-peer-urls=http://0.0.0.0:2380", "--initial-advertise-peer-urls=http://" + host + ":2380",
							"--listen-metrics-urls=http://0.0.0.0:2381",
							"--initial-cluster=" + strings.Join(initial, ","), "--initial-cluster-state=new",
							"--initial-cluster-token=" + s.Namespace + "-" + s.Name},
						Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
						Ports:          []corev1.ContainerPort{{Name: "client", ContainerPort: 2379}, {Name: "peer", ContainerPort: 2380}},
						ReadinessProbe: probe("/readyz?exclude=linearizable_read", 1, 3),
						LivenessProbe:  probe("/livez", 5, 8),
						StartupProbe:   probe("/livez", 1, 300),
						VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
					}},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
			}},
		},
	}
}

// ClientService routes to every ready member, as Steward's client Service does.
func (s EtcdSet) ClientService() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name + "-client", Labels: s.Labels()},
		Spec: corev1.ServiceSpec{Selector: s.Labels(),
			Ports: []corev1.ServicePort{{Name: "client", Port: 2379, TargetPort: intstr.FromInt32(2379)}}},
	}
}
