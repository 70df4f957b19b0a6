package resources

import (
	corev1 "k8s.io/api/core/v1"
)

// Where the member binary is copied for the etcd container (etcd's images are distroless).
const (
	toolsVolume = "steward-tools"
	toolsDir    = "/steward-tools"
	// MemberBinary is the member binary's path in the Steward image (cmd/steward-member): the data
	// check and nothing of the operator, so what every Pod start copies is 19 MB, not 89.
	MemberBinary = "/steward-member"
	// EtcdBinary is etcd's path in its official images.
	EtcdBinary = "/usr/local/bin/etcd"
)

// withDataCheck starts etcd through `steward-member run-etcd`: an init container copies the member
// binary into a volume that lives as long as the Pod, and the etcd container runs it, which checks
// the data directory (every start, restarts in place included) and then runs etcd.
func withDataCheck(pod *corev1.Pod, m Member) {
	install := corev1.Container{
		Name: "steward-install", Image: m.ToolsImage, ImagePullPolicy: corev1.PullIfNotPresent,
		Command:                  []string{MemberBinary, "install-self", toolsDir + MemberBinary},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		VolumeMounts:             []corev1.VolumeMount{{Name: toolsVolume, MountPath: toolsDir}},
		SecurityContext:          RestrictedContainer(),
	}
	pod.Spec.InitContainers = append([]corev1.Container{install}, pod.Spec.InitContainers...)
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: toolsVolume,
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	c := &pod.Spec.Containers[0]
	cmd := []string{toolsDir + MemberBinary, "run-etcd", "--data-dir=" + DataMountPath + "/data",
		"--marker=" + toolsDir + "/started"}
	if b := m.Bootstrap; b.MemberID != "" {
		cmd = append(cmd, "--member-id="+b.MemberID)
	}
	if m.Bootstrap.ExpectData {
		cmd = append(cmd, "--expect-data")
	}
	c.Command = append(cmd, "--", EtcdBinary)
	// Writable: the wrapper marks the first start there.
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: toolsVolume, MountPath: toolsDir})
}
