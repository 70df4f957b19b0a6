package plan

import (
	"testing"

	"github.com/etcd-steward/steward/internal/disruption"
)

// restartedInPlace makes member name run the target already, restarted in place from container "old": the
// kubelet now reports container "new", ready, and the Pod's Ready condition observed generation 2.
func restartedInPlace(name string) func(f *Facts) {
	return func(f *Facts) {
		m := f.m(name)
		m.Template.Image = f.Cluster.Status.Observed.Image
		m.Pod.Template = m.Template.DeepCopy()
		m.Pod.ImageOnly = false
		p := &m.Pod
		p.RestartedFrom, p.ContainerID, p.ContainerReady = "containerd://old", "containerd://new", true
		p.Generation, p.ReadyObservedGeneration = 2, 2
	}
}

// An in-place restart is done when the kubelet says so for the restarted container: the Pod's
// Ready condition observed the generation of the change, the etcd container is a new one and
// ready, and etcd answers. Until then the member is not available: the next member is not
// restarted, nor made leader (issue 23, finding 9: two members out of the client Service at once
// when a stale Ready was believed).
func TestPlanRestartInPlaceDoneWhenKubeletSaysSo(t *testing.T) {
	stale := func(edit func(p *Pod)) func(f *Facts) {
		return all(newImage, restartedInPlace("c-2"), func(f *Facts) { edit(&f.m("c-2").Pod) })
	}
	runPlanCases(t, []planCase{
		{name: "done: the next member restarts", mutate: all(newImage, restartedInPlace("c-2")),
			want: want{kind: RestartContainer, member: "c-1", reason: ReasonRollingMember, disruption: disruption.RestartContainer}},
		{name: "Ready from before the kubelet saw the change", mutate: stale(func(p *Pod) { p.ReadyObservedGeneration = 1 }),
			want: want{kind: Wait, reason: ReasonWaitingForHealth, message: "c-2"}},
		{name: "still the container from before the restart", mutate: stale(func(p *Pod) { p.ContainerID = "containerd://old" }),
			want: want{kind: Wait, reason: ReasonWaitingForHealth, message: "c-2"}},
		{name: "no container yet", mutate: stale(func(p *Pod) { p.ContainerID = "" }),
			want: want{kind: Wait, reason: ReasonWaitingForHealth, message: "c-2"}},
		{name: "the new container is not ready yet", mutate: stale(func(p *Pod) { p.ContainerReady = false }),
			want: want{kind: Wait, reason: ReasonWaitingForHealth, message: "c-2"}},
		{name: "a later spec change the kubelet has not seen", mutate: stale(func(p *Pod) { p.Generation = 3 }),
			want: want{kind: Wait, reason: ReasonWaitingForHealth, message: "c-2"}},
		{name: "a Pod never restarted in place is judged as before", mutate: func(f *Facts) {
			newImage(f)
			restartedInPlace("c-2")(f)
			p := &f.m("c-2").Pod
			p.RestartedFrom, p.ContainerID, p.ContainerReady, p.Generation, p.ReadyObservedGeneration = "", "", false, 5, 0
		}, want: want{kind: RestartContainer, member: "c-1", disruption: disruption.RestartContainer}},
		{name: "leadership goes to a member whose restart is done", mutate: all(newImage, restartedInPlace("c-1"), restartedInPlace("c-2"),
			func(f *Facts) { f.m("c-1").Pod.ReadyObservedGeneration = 1 }),
			want: want{kind: MoveLeader, member: "c-0", target: "c-2", reason: ReasonMovingLeader}},
		{name: "no member done: no leadership target", mutate: all(newImage, restartedInPlace("c-1"), restartedInPlace("c-2"),
			func(f *Facts) {
				f.m("c-1").Pod.ContainerID, f.m("c-2").Pod.ContainerID = "containerd://old", "containerd://old"
			}),
			want: want{kind: Wait}},
	})
}

// The chokepoint sees the same: the restarted member's Pod is not ready, so disrupting another
// member is refused even by a caller that skipped the plan.
func TestDisruptionViewRestartInPlace(t *testing.T) {
	f := healthyFacts(t, 3, "")
	newImage(&f)
	restartedInPlace("c-2")(&f)
	f.m("c-2").Pod.ContainerID = "containerd://old"
	for _, m := range f.DisruptionView().Members {
		if m.Name == "c-2" && m.PodReady {
			t.Errorf("c-2's restart is not done, yet its Pod counts as ready: %+v", m)
		}
	}
	err := disruption.Check(f.DisruptionView(), disruption.Request{Kind: disruption.RestartContainer, Victim: "c-1"})
	if err == nil {
		t.Errorf("restarting c-1 while c-2's restart is not done must be refused")
	}
}
