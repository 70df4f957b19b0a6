package framework

import (
	"fmt"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/etcd-steward/steward/internal/resources"
)

// BitnamiEtcd is an etcd StatefulSet laid out as the Bitnami chart (bitnami/etcd) runs it with
// its defaults and no TLS: the release's StatefulSet <Name> with Parallel pod management and a
// PVC per member, a headless Service <Name>-headless (not-ready addresses published: members
// resolve each other before any is Ready) and a client Service <Name>; each member named after
// its Pod, peer and client URLs on the Pod's FQDN under the headless Service
// (http://<pod>.<Name>-headless.<ns>.svc.cluster.local:2380 and :2379), the client Service's URL
// advertised as well, initial cluster state new, configured through ETCD_* environment
// variables. Unlike the chart it runs the upstream etcd image of the suite (so the versions
// match Steward's), with the suite's restricted security context, and has no preStop hook (the
// chart's removes a member from etcd when its container stops; its script is in the Bitnami
// image only). Auth stays off (the chart's allowNoneAuthentication). It is the source
// Steward's adoption (spec.bootstrap.join) takes over in the e2e tests.
type BitnamiEtcd struct {
	Namespace string
	Name      string // the release name: StatefulSet and client Service
	Replicas  int
	Image     string
	// AutoCompactionMode and AutoCompactionRetention are the chart's autoCompactionMode and
	// autoCompactionRetention (unset by default: etcd's defaults).
	AutoCompactionMode      string
	AutoCompactionRetention string
	// PreStop gives the etcd container the chart's preStop hook (removeMemberOnContainerTermination,
	// on by default in the chart), which removes the member from etcd when its container stops.
	// Its script exists only in the Bitnami image: here the hook is declared (what an adoption's
	// preflight looks for) and fails if it ever runs.
	PreStop bool
}

// ClusterDomain is the cluster's DNS domain ($STEWARD_E2E_CLUSTER_DOMAIN, default cluster.local).
func ClusterDomain() string { return envOr("STEWARD_E2E_CLUSTER_DOMAIN", "cluster.local") }

// Labels select the release's Pods, as the chart's do.
func (b BitnamiEtcd) Labels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": "etcd", "app.kubernetes.io/instance": b.Name}
}

// HeadlessName is the headless Service that gives members their DNS names.
func (b BitnamiEtcd) HeadlessName() string { return b.Name + "-headless" }

// PodNames are the member Pods, which are also the etcd member names.
func (b BitnamiEtcd) PodNames() []string {
	out := make([]string, b.Replicas)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", b.Name, i)
	}
	return out
}

func (b BitnamiEtcd) podHost(pod string) string {
	return fmt.Sprintf("%s.%s.%s.svc.%s", pod, b.HeadlessName(), b.Namespace, ClusterDomain())
}

// PeerURL is a member's peer URL.
func (b BitnamiEtcd) PeerURL(pod string) string { return "http://" + b.podHost(pod) + ":2380" }

// MemberClientURL is a member's own client URL, the first it advertises.
func (b BitnamiEtcd) MemberClientURL(pod string) string { return "http://" + b.podHost(pod) + ":2379" }

// ClientURL is the client Service's URL, what applications of the chart are given.
func (b BitnamiEtcd) ClientURL() string {
	return fmt.Sprintf("http://%s.%s.svc.%s:2379", b.Name, b.Namespace, ClusterDomain())
}

// HeadlessService publishes every member's address, ready or not.
func (b BitnamiEtcd) HeadlessService() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: b.HeadlessName(), Labels: b.Labels()},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true, Selector: b.Labels(),
			Ports: []corev1.ServicePort{
				{Name: "client", Port: 2379, TargetPort: intstr.FromString("client")},
				{Name: "peer", Port: 2380, TargetPort: intstr.FromString("peer")},
			},
		},
	}
}

// ClientService routes to the ready members.
func (b BitnamiEtcd) ClientService() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: b.Name, Labels: b.Labels()},
		Spec: corev1.ServiceSpec{Selector: b.Labels(),
			Ports: []corev1.ServicePort{
				{Name: "client", Port: 2379, TargetPort: intstr.FromString("client")},
				{Name: "peer", Port: 2380, TargetPort: intstr.FromString("peer")},
			}},
	}
}

// StatefulSet runs the members.
func (b BitnamiEtcd) StatefulSet() *appsv1.StatefulSet {
	var initial []string
	for _, p := range b.PodNames() {
		initial = append(initial, p+"="+b.PeerURL(p))
	}
	podHost := fmt.Sprintf("$(MY_POD_NAME).%s.%s.svc.%s", b.HeadlessName(), b.Namespace, ClusterDomain())
	env := []corev1.EnvVar{
		{Name: "MY_POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "MY_POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "ETCDCTL_API", Value: "3"},
		{Name: "ETCD_NAME", Value: "$(MY_POD_NAME)"},
		{Name: "ETCD_DATA_DIR", Value: "/bitnami/etcd/data"},
		{Name: "ETCD_LOG_LEVEL", Value: "info"},
		{Name: "ETCD_ADVERTISE_CLIENT_URLS", Value: "http://" + podHost + ":2379," + b.ClientURL()},
		{Name: "ETCD_LISTEN_CLIENT_URLS", Value: "http://0.0.0.0:2379"},
		{Name: "ETCD_INITIAL_ADVERTISE_PEER_URLS", Value: "http://" + podHost + ":2380"},
		{Name: "ETCD_LISTEN_PEER_URLS", Value: "http://0.0.0.0:2380"},
		{Name: "ETCD_INITIAL_CLUSTER_TOKEN", Value: "etcd-cluster-k8s"},
		{Name: "ETCD_INITIAL_CLUSTER_STATE", Value: "new"},
		{Name: "ETCD_INITIAL_CLUSTER", Value: strings.Join(initial, ",")},
	}
	if b.AutoCompactionMode != "" {
		env = append(env, corev1.EnvVar{Name: "ETCD_AUTO_COMPACTION_MODE", Value: b.AutoCompactionMode})
	}
	if b.AutoCompactionRetention != "" {
		env = append(env, corev1.EnvVar{Name: "ETCD_AUTO_COMPACTION_RETENTION", Value: b.AutoCompactionRetention})
	}
	// /health answers 503 without a leader or with an alarm: Ready means "serves". The chart
	// probes with a script (etcdctl endpoint health) after 60 s; these start at once, so the
	// client Service has endpoints as soon as the cluster serves.
	probe := func(period, failures int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString("client")}},
			PeriodSeconds: period, TimeoutSeconds: 2, FailureThreshold: failures}
	}
	var lifecycle *corev1.Lifecycle
	if b.PreStop {
		lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
			Exec: &corev1.ExecAction{Command: []string{"/opt/bitnami/scripts/etcd/prestop.sh"}}}}
	}
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: b.Name, Labels: b.Labels()},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(int32(b.Replicas)),
			ServiceName:         b.HeadlessName(),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			Selector:            &metav1.LabelSelector{MatchLabels: b.Labels()},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: b.Labels()},
				Spec: corev1.PodSpec{
					SecurityContext: resources.RestrictedPod(),
					Containers: []corev1.Container{{
						Name: "etcd", Image: b.Image, ImagePullPolicy: corev1.PullIfNotPresent,
						SecurityContext: resources.RestrictedContainer(),
						Command:         []string{"etcd"},
						Env:             env,
						Ports:           []corev1.ContainerPort{{Name: "client", ContainerPort: 2379}, {Name: "peer", ContainerPort: 2380}},
						ReadinessProbe:  probe(2, 3),
						LivenessProbe:   probe(10, 5),
						Lifecycle:       lifecycle,
						VolumeMounts:    []corev1.VolumeMount{{Name: "data", MountPath: "/bitnami/etcd"}},
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

// ClusterDNS is the cluster DNS server the tests resolve Service and Pod names with
// ($STEWARD_E2E_CLUSTER_DNS; hack/e2e.sh sets it).
func ClusterDNS() string { return os.Getenv("STEWARD_E2E_CLUSTER_DNS") }
