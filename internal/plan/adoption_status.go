package plan

import (
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/adoption"
)

// adoptionStatus is status.adoption after this reconcile: the phase follows from the facts and the
// action taken, and every source member found is kept on record with what became of it. next is
// the action a paused cluster holds back: the message says what would happen.
func (v *view) adoptionStatus(a Action, next *Action) *stewardv1.AdoptionStatus {
	prev := v.f.Cluster.Status.Adoption
	if v.f.join() == nil {
		return prev
	}
	out := &stewardv1.AdoptionStatus{}
	if prev != nil {
		out = prev.DeepCopy()
	}
	now := metav1.NewTime(v.f.Now)
	started := v.handOverStarted() || a.Kind == StartHandOver
	message := a.Message
	if next != nil {
		message = "paused; next: " + next.Message
	}
	if !v.f.Adopting() {
		return out
	}
	if !v.f.Etcd.MemberListKnown() {
		// Nothing is known of the members now; before the hand-over the preflight says why.
		switch {
		case !started && v.f.Adoption != nil:
			out.Checks, out.Phase = v.f.Adoption.Checks, stewardv1.AdoptionRefused
			_, why := adoption.Passed(out.Checks)
			message = refusedMessage(why)
		case out.Phase == "":
			out.Phase = stewardv1.AdoptionPreflight
		}
		out.Message = message
		return out
	}
	v.recordSources(out)
	if out.ClusterID == "" {
		out.ClusterID = v.f.EtcdClusterID
	}
	if out.Version == "" {
		for _, s := range v.sources {
			if s.ep != nil && s.ep.Version != "" {
				out.Version = s.ep.Version
			}
		}
	}
	switch {
	case v.f.abortingAdoption() && len(v.sourceVoters()) == 0 && started:
		out.Phase = stewardv1.AdoptionDone
	case v.f.abortingAdoption() && v.sourcesGone() > 0 && v.f.Cluster.DeletionTimestamp == nil:
		out.Phase = stewardv1.AdoptionHandingOver // the abort is refused (abortAdoption says why)
	case v.f.abortingAdoption() && len(v.members) == 0 && !v.anyOursInEtcd():
		out.Phase = stewardv1.AdoptionAborted
	case v.f.abortingAdoption():
		out.Phase = stewardv1.AdoptionAborting
	case !started && v.f.Adoption != nil:
		out.Checks = v.f.Adoption.Checks
		out.Phase = stewardv1.AdoptionPreflight
		if ok, why := adoption.Passed(out.Checks); !ok {
			// Whatever step ran first (recording the target), the refusal is what to read.
			out.Phase, message = stewardv1.AdoptionRefused, refusedMessage(why)
		}
	case !started:
		out.Phase = stewardv1.AdoptionPreflight
	case len(v.sourceVoters()) == 0 && v.stopped(out):
		out.Phase = stewardv1.AdoptionDone
	default:
		out.Phase = stewardv1.AdoptionHandingOver
	}
	if started && out.StartedAt == nil {
		out.StartedAt = &now
	}
	if (out.Phase == stewardv1.AdoptionDone || out.Phase == stewardv1.AdoptionAborted) && out.FinishedAt == nil {
		out.FinishedAt = &now
	}
	out.Message = message
	return out
}

// anyOursInEtcd: a member of the live list that is not the source's, i.e. one of Steward's.
func (v *view) anyOursInEtcd() bool {
	return len(v.f.Etcd.Members) > len(v.sources)
}

// stopped: every source member that left etcd is stopped, as far as Steward stops them (with a
// StatefulSet named, its Pod is gone).
func (v *view) stopped(out *stewardv1.AdoptionStatus) bool {
	for _, s := range out.SourceMembers {
		if s.State == stewardv1.SourceRemoved && v.sourceSet() != nil && s.Pod != "" {
			return false
		}
	}
	return true
}

// recordSources brings status.adoption.sourceMembers up to date: live source members Serving,
// recorded ones gone from etcd Removed, and Stopped once their StatefulSet Pod is gone.
func (v *view) recordSources(out *stewardv1.AdoptionStatus) {
	live := map[string]bool{}
	for _, s := range v.sources {
		id := strconv.FormatUint(s.id(), 16)
		live[id] = true
		peer := ""
		if len(s.live.PeerURLs) > 0 {
			peer = s.live.PeerURLs[0]
		}
		i := slices.IndexFunc(out.SourceMembers, func(r stewardv1.SourceMember) bool { return r.ID == id })
		if i < 0 {
			out.SourceMembers = append(out.SourceMembers, stewardv1.SourceMember{ID: id})
			i = len(out.SourceMembers) - 1
		}
		r := &out.SourceMembers[i]
		r.Name, r.PeerURL, r.State = s.live.Name, peer, stewardv1.SourceServing
		if r.Pod == "" {
			r.Pod = v.sourcePod(*s.live)
		}
	}
	set := v.sourceSet()
	for i := range out.SourceMembers {
		r := &out.SourceMembers[i]
		if live[r.ID] {
			continue
		}
		r.State = stewardv1.SourceRemoved
		if set != nil && r.Pod != "" && !slices.ContainsFunc(set.Pods, func(p SourcePod) bool { return p.Name == r.Pod }) {
			r.State = stewardv1.SourceStopped
		}
	}
}
