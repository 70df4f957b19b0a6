package plan

// readyNow: the Pod's Ready speaks for the etcd container that runs now. Right after an in-place
// restart the kubelet has not caught up: the Pod can still say Ready for the container that was
// restarted (and turn not-Ready a moment later), while etcd already answers from the new one.
// Believing it let a second member be restarted while the first was out of the client Service.
func (p Pod) readyNow() bool {
	return p.Ready && p.restartDone()
}

// restartDone: no in-place restart is pending on the Pod, or the kubelet reports it finished: the
// Ready condition was computed at or past the Pod's generation (which includes the change), the
// etcd container is another one than the one restarted, and it is ready. That etcd answers is the
// caller's part (available). A Pod never restarted in place (RestartedFrom "") is judged as before.
func (p Pod) restartDone() bool {
	if p.RestartedFrom == "" {
		return true
	}
	return p.ReadyObservedGeneration >= p.Generation && p.ContainerID != "" && p.ContainerID != p.RestartedFrom &&
		p.ContainerReady
}
