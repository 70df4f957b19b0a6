package plan

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
)

// onResources: every member runs cpu 100m, applied by the kubelet; the target asks 250m.
func onResources(f *Facts) {
	for i := range f.Members {
		m := &f.Members[i]
		cpu("100m")(&m.Template)
		m.Pod.Resize = Resize{Spec: *m.Template.Resources.DeepCopy(), Applied: true}
	}
	cpu("100m")(&f.Cluster.Spec.MemberTemplate)
	cpu("100m")(f.Cluster.Status.Observed)
	f.retarget(cpu("250m"))
}

// othersDone: c-0 and c-1 are resized already.
func othersDone(f *Facts) {
	onResources(f)
	for _, n := range []string{"c-0", "c-1"} {
		cpu("250m")(&f.m(n).Template)
		requested(f, n, true)
	}
}

// requested: the member's Pod was asked for the target resources.
func requested(f *Facts, name string, applied bool) {
	m := f.m(name)
	m.Pod.Resize = Resize{Spec: *f.Cluster.Status.Observed.Resources.DeepCopy(), Applied: applied}
}

func TestPlanResize(t *testing.T) {
	runPlanCases(t, []planCase{
		{name: "pvc: resize the highest follower, no disruption", mutate: onResources,
			want: want{kind: ResizePod, member: "c-2", reason: ReasonResizingInPlace}},
		{name: "memory too: no replacement for CPU", medium: memory, mutate: onResources,
			want: want{kind: ResizePod, member: "c-2", reason: ReasonResizingInPlace}},
		{name: "one at a time: wait for the kubelet", mutate: func(f *Facts) {
			onResources(f)
			requested(f, "c-2", false)
		}, want: want{kind: Wait, reason: ReasonResizingInPlace}},
		{name: "the API server defaulted the memory request to the limit: still the template", mutate: func(f *Facts) {
			onResources(f)
			f.retarget(func(t *stewardv1.MemberTemplate) {
				t.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
			})
			for i := range f.Members {
				f.Members[i].Template.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}
			}
			requested(f, "c-2", true)
			f.m("c-2").Pod.Resize.Spec.Requests[corev1.ResourceMemory] = resource.MustParse("1Gi")
		}, want: want{kind: RecordTemplate, member: "c-2", reason: ReasonResizingInPlace}},
		{name: "applied: record the template", mutate: func(f *Facts) {
			onResources(f)
			requested(f, "c-2", true)
		}, want: want{kind: RecordTemplate, member: "c-2", reason: ReasonResizingInPlace}},
		{name: "the leader is resized last, with no handoff", mutate: func(f *Facts) {
			onResources(f)
			for _, n := range []string{"c-1", "c-2"} {
				cpu("250m")(&f.m(n).Template)
				requested(f, n, true)
			}
		}, want: want{kind: ResizePod, member: "c-0", reason: ReasonResizingInPlace}},
		{name: "an unhealthy member first, as in a roll (a resize may be what it needs)", mutate: func(f *Facts) {
			onResources(f)
			f.ep("c-1").Healthy = false
		}, want: want{kind: ResizePod, member: "c-1", reason: ReasonResizingInPlace}},
		{name: "the gate holds a resize too", mutate: func(f *Facts) {
			onResources(f)
			cpu("250m")(&f.m("c-2").Template)
			requested(f, "c-2", true)
			f.ep("c-2").Healthy = false
		}, want: want{kind: Wait, reason: ReasonWaitingForHealth}},
		{name: "infeasible on the node: the others go on in place", mutate: func(f *Facts) {
			onResources(f)
			requested(f, "c-2", false)
			f.m("c-2").Pod.Resize.Pending = "Infeasible"
		}, want: want{kind: ResizePod, member: "c-1", reason: ReasonResizingInPlace}},
		{name: "infeasible on the node: restart instead", mutate: func(f *Facts) {
			othersDone(f)
			requested(f, "c-2", false)
			f.m("c-2").Pod.Resize.Pending = "Infeasible"
		}, want: want{kind: DeletePod, member: "c-2", reason: ReasonRollingMember, disruption: disruption.Restart}},
		{name: "deferred briefly: wait", mutate: func(f *Facts) {
			onResources(f)
			requested(f, "c-2", false)
			f.m("c-2").Pod.Resize.Pending, f.m("c-2").Pod.Resize.PendingSince = "Deferred", f.Now.Add(-20*time.Second)
		}, want: want{kind: Wait, reason: ReasonResizingInPlace}},
		{name: "deferred past the bound: restart instead", mutate: func(f *Facts) {
			othersDone(f)
			requested(f, "c-2", false)
			f.m("c-2").Pod.Resize.Pending, f.m("c-2").Pod.Resize.PendingSince = "Deferred", f.Now.Add(-2*time.Minute)
		}, want: want{kind: DeletePod, member: "c-2", reason: ReasonRollingMember, disruption: disruption.Restart}},
		{name: "refused by the API: restart instead", mutate: func(f *Facts) {
			othersDone(f)
			f.m("c-2").Pod.Resize.Refused = "Pod QoS is immutable"
		}, want: want{kind: DeletePod, member: "c-2", reason: ReasonRollingMember, disruption: disruption.Restart}},
		{name: "memory limit lowered: a restart, never an OOM kill", mutate: func(f *Facts) {
			limit := func(q string) func(*stewardv1.MemberTemplate) {
				return func(t *stewardv1.MemberTemplate) {
					t.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(q)}
				}
			}
			for i := range f.Members {
				limit("1Gi")(&f.Members[i].Template)
			}
			limit("1Gi")(f.Cluster.Status.Observed)
			f.retarget(limit("512Mi"))
		}, want: want{kind: DeletePod, member: "c-2", reason: ReasonRollingMember, disruption: disruption.Restart}},
		{name: "OnDelete: nothing in place either", mutate: func(f *Facts) {
			onResources(f)
			f.Cluster.Spec.UpdateStrategy.Type = stewardv1.OnDelete
		}, want: want{kind: Nothing}},
	})
}

// The status says which members go in place.
func TestResizeStatus(t *testing.T) {
	d := planFor(t, 3, "", onResources)
	if d.Rollout == nil || len(d.Rollout.InPlace) != 3 || d.Rollout.Member != "c-2" {
		t.Fatalf("rollout %+v: want c-2 resizing and all three in place", d.Rollout)
	}
	if c := d.Changes["c-0"]; c != ChangeResize {
		t.Errorf("change %s, want resize", c)
	}
}

// A resources-only change converges with no Pod deleted and no member removed: each member resized
// once, one at a time.
func TestSequenceResizeInPlace(t *testing.T) {
	for _, med := range media {
		w := formedWorld(t, 3, med)
		w.converge(map[int]func(*world){1: changeResources("2")})
		w.assertConverged()
		before := ids(w)
		w.check = func(w *world) {
			busy := 0
			for _, m := range w.members {
				if m.pod != nil && m.pod.resizing {
					busy++
				}
			}
			if busy > 1 {
				w.violate("%d Pods resizing at once", busy)
			}
		}
		touchedBefore := len(w.touched())
		w.converge(map[int]func(*world){1: changeResources("3")})
		w.assertConverged()
		if touched := w.touched()[touchedBefore:]; len(touched) != 0 || w.resizes != 3 {
			t.Errorf("%s: touched %s, %d resizes; want none touched and 3 resizes", mediumName(med), names(touched), w.resizes)
		}
		if after := ids(w); !equality.Semantic.DeepEqual(before, after) {
			t.Errorf("%s: member IDs changed %v -> %v", mediumName(med), before, after)
		}
	}
}
