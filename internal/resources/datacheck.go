package resources

import (
	corev1 "k8s.io/api/core/v1"
)

// Where the member binary is copied for the etcd container (etcd's images are distroless), or
// where the Steward image is mounted instead; the wrapper's marker is in toolsDir either way.
const (
	toolsVolume = "steward-tools"
	toolsDir    = "/steward-tools"
	imageVolume = "steward-image"
	imageDir    = "/steward-image"
	// MemberBinary is the member binary's path in the Steward image (cmd/steward-member): the data
	// check and nothing of the operator, so what every Pod start copies is 19 MB, not 89.
	MemberBinary = "/steward-member"
	// EtcdBinary is etcd's path in its official images.
	EtcdBinary = "/usr/local/bin/etcd"
)

// withDataCheck starts etcd through `steward-member run-etcd`, which checks the data directory
// (every start, restarts in place included) and then runs etcd. The member binary comes from the
// Steward image: mounted as an image volume where the cluster can (m.ToolsFromImage), else copied
// by an init container into a volume that lives as long as the Pod. The copy costs every Pod start
// an init container: the kubelet sees it exit only at its next relist of the runtime (every 1 s)
// and only then starts etcd's container.
func withDataCheck(pod *corev1.Pod, m Member) {
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: toolsVolume,
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	binary := toolsDir + MemberBinary
	c := &pod.Spec.Containers[0]
	if m.ToolsFromImage {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: imageVolume, VolumeSource: corev1.VolumeSource{
			Image: &corev1.ImageVolumeSource{Reference: m.ToolsImage, PullPolicy: corev1.PullIfNotPresent}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: imageVolume, MountPath: imageDir, ReadOnly: true})
		binary = imageDir + MemberBinary
	} else {
		install := corev1.Container{
			Name: "steward-install", Image: m.ToolsImage, ImagePullPolicy: corev1.PullIfNotPresent,
			Command:                  []string{MemberBinary, "install-self", toolsDir + MemberBinary},
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			VolumeMounts:             []corev1.VolumeMount{{Name: toolsVolume, MountPath: toolsDir}},
			SecurityContext:          RestrictedContainer(),
		}
		pod.Spec.InitContainers = append([]corev1.Container{install}, pod.Spec.InitContainers...)
	}
	cmd := []string{binary, "run-etcd", "--data-dir=" + DataMountPath + "/data",
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
