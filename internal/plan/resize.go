package plan

import (
	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/api/equality"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// resize moves members whose only change is CPU or memory onto the target in place, one at a time
// in the roll's order: the Pod's resize is requested, the kubelet applies it to the running
// container, then the template is recorded. No restart and no disruption, so no chokepoint; the
// recovery gate still has to pass before each member, as for any step of a rollout.
func (v *view) resize() (Action, bool) {
	var todo []*memberView
	for _, m := range v.active() {
		if !v.kept(m) || m.Phase != stewardv1.MemberRunning || !m.change.Has(ChangeResize) || !m.Pod.Exists || m.Pod.Deleting {
			continue
		}
		requested := equality.Semantic.DeepEqual(EffectiveResources(m.Pod.Resize.Spec), EffectiveResources(v.target.Resources))
		switch {
		case requested && m.Pod.Resize.Applied:
			return act(RecordTemplate, m.Name, ReasonResizingInPlace, "%s runs on the new resources: recording it", m.Name), true
		case requested:
			// One resize at a time: wait for this one before the next member.
			return wait(ReasonResizingInPlace, "resizing %s in place: %s", m.Name, m.resizeState()), true
		}
		todo = append(todo, m)
	}
	if len(todo) == 0 {
		return Action{}, false
	}
	m := v.byRollOrder(todo)[0]
	if r := v.gate(m.Name); !r.Passed() {
		return wait(ReasonWaitingForHealth, "resizing %s waits for the recovery gate: %s", m.Name, r), true
	}
	return act(ResizePod, m.Name, ReasonResizingInPlace, "resizing %s's etcd container in place (no restart)", m.Name), true
}

// resizeMembers are the members whose change is a resize in place.
func (v *view) resizeMembers() []*memberView {
	var out []*memberView
	for _, m := range v.active() {
		if v.kept(m) && m.Phase == stewardv1.MemberRunning && m.change.Has(ChangeResize) {
			out = append(out, m)
		}
	}
	return out
}

func (m *memberView) resizeState() string {
	if r := m.Pod.Resize; r.Pending != "" {
		return "the kubelet reports it " + r.Pending
	}
	return "the kubelet has not applied it yet"
}

// resizeGivenUp says why a member that could be resized in place rolls instead: the API refused the
// resize, the node cannot fit it, or the kubelet deferred it too long. "" while in place still works.
func (v *view) resizeGivenUp(m *memberView) string {
	r := m.Pod.Resize
	switch {
	case !m.Pod.Exists:
		return ""
	case r.Refused != "":
		return "the resize was refused: " + r.Refused
	case r.Pending == "Infeasible":
		return "the node cannot fit the new resources"
	case r.Pending == "Deferred" && !r.PendingSince.IsZero() && v.f.Now.Sub(r.PendingSince) >= v.lim.ResizeDeferred:
		return "the kubelet deferred the resize for " + v.f.Now.Sub(r.PendingSince).Round(1e9).String()
	}
	return ""
}

// EffectiveResources is what the API server stores for a container's resources: a limit without a
// request makes the request equal to the limit. Comparing without it, a Pod asked for exactly the
// template would never look resized.
func EffectiveResources(r corev1.ResourceRequirements) corev1.ResourceRequirements {
	r = *r.DeepCopy()
	for k, l := range r.Limits {
		if _, ok := r.Requests[k]; !ok {
			if r.Requests == nil {
				r.Requests = corev1.ResourceList{}
			}
			r.Requests[k] = l.DeepCopy()
		}
	}
	return r
}
