package plan

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/evidence"
)

// formed reports whether the cluster ever formed. Only a cluster that never formed may start a seed
// with --initial-cluster-state=new: doing it later would split off a second cluster.
func (v *view) formed() bool {
	if v.f.Cluster.Status.ClusterID != "" || len(v.f.Etcd.Members) > 0 || v.f.join() != nil {
		return true // a joining cluster formed long ago, elsewhere
	}
	for _, m := range v.members {
		if m.ID != "" || (m.Phase != "" && m.Phase != stewardv1.MemberPending) {
			return true
		}
	}
	return false
}

// bootstrap starts one seed while the cluster has never formed; growth then is a normal scale-up.
func (v *view) bootstrap(notes) outcome {
	if v.formed() {
		return pass()
	}
	if v.f.replicas() == 0 {
		return decided(act(Nothing, "", ReasonDormant, "spec.replicas is 0 and the cluster never formed"))
	}
	if v.f.RestoreHold != "" {
		return decided(wait(ReasonRestoreRefused, "%s", v.f.RestoreHold))
	}
	active := v.active()
	if len(active) == 0 {
		// The lowest free ordinal: 0, unless a quorum recovery kept a PVC under that name.
		o := v.lowestFreeOrdinal()
		a := act(CreateMember, memberName(v.f, o), ReasonBootstrapping, "creating the seed member")
		a.Ordinal = o
		return built(a)
	}
	seed := active[0]
	switch {
	case seed.PVC.Foreign:
		return decided(foreignPVC(seed))
	case !seed.Pod.Exists:
		return built(act(BootstrapSeed, seed.Name, ReasonBootstrapping,
			"starting seed %s with --initial-cluster-state=new", seed.Name))
	case seed.Pod.Failed && !seed.Pod.Deleting:
		// Evicted or rejected before the cluster formed: nothing is lost by rebuilding it.
		a, _ := v.disrupt(act(DeletePod, seed.Name, ReasonMemberPodFailed, "deleting seed %s's Failed Pod to start it again", seed.Name),
			disruption.Restart)
		return decided(a)
	case seed.Pod.Unschedulable || seed.Pod.Phase == corev1.PodPending:
		if a, ok := v.rebuildUnstartedSeed(seed); ok {
			return decided(a)
		}
		if seed.Pod.Unschedulable {
			return decided(wait(ReasonMemberUnschedulable, "seed %s cannot be scheduled", seed.Name))
		}
	}
	return decided(wait(ReasonBootstrapping, "waiting for seed %s to form the cluster", seed.Name))
}

// rebuildUnstartedSeed lets a spec edit reach a seed whose etcd never ran (unschedulable, or its
// containers never started): nothing formed, so there is nothing to lose, and this is how fixing an
// impossible nodeSelector lets a bootstrap proceed. The edit is adopted at once (no member is
// disrupted: none exists), then the seed's Pod is rebuilt from the new target.
func (v *view) rebuildUnstartedSeed(seed *memberView) (Action, bool) {
	if !v.f.specAdopted() {
		return act(AdoptSpec, "", ReasonSpecChanged, "adopting the changed spec: seed %s never ran", seed.Name), true
	}
	if !Compare(seed.Template, v.target, v.f.medium()).Has(ChangeRoll) || seed.Pod.Deleting {
		return Action{}, false
	}
	a, _ := v.disrupt(act(DeletePod, seed.Name, ReasonBootstrapping,
		"rebuilding seed %s on the new template: it never ran", seed.Name), disruption.Restart)
	return a, true
}

func memberName(f *Facts, ordinal int32) string {
	return fmt.Sprintf("%s-%d", f.Cluster.Name, ordinal)
}

func foreignPVC(m *memberView) Action {
	return wait(ReasonForeignPVC, "PVC data-%s belongs to another (deleted) cluster; Steward never adopts "+
		"or deletes it: delete it, or restore from it into a new cluster", m.Name)
}

// dormant takes a PVC cluster scaled to 0 down to no Pods, followers first and the leader last;
// members and PVCs stay, so scaling up again resumes with the same data.
func (v *view) dormant() (Action, bool) {
	if v.f.replicas() != 0 {
		return Action{}, false
	}
	if v.f.memory() {
		return wait(ReasonBlocked, "spec.replicas 0 is refused with memory storage: all data would be lost"), true
	}
	if v.f.Etcd.MemberListKnown() {
		// Finish a membership step first so nothing is left half-done while dormant.
		if a, ok, _ := v.halfDoneMembership(); ok {
			return a, true
		}
	}
	var victim *memberView
	for i := len(v.members) - 1; i >= 0; i-- {
		m := v.members[i]
		if m.Pod.Exists && m.Pod.Deleting {
			return wait(ReasonGoingDormant, "waiting for %s's Pod to go", m.Name), true
		}
		if m.Pod.Exists && (victim == nil || victim.leader) {
			victim = m
		}
	}
	if victim == nil {
		return act(Nothing, "", ReasonDormant, "dormant: no Pods run; PVCs keep the data"), true
	}
	a, _ := v.disrupt(act(DeletePod, victim.Name, ReasonGoingDormant, "stopping %s (spec.replicas is 0)", victim.Name),
		disruption.Dormant)
	return a, true
}

// quorumLost: without quorum no membership change is possible or safe. The only thing to do is give
// back PVC members their Pods (data intact), which may restore quorum; memory members' data is gone.
func (v *view) quorumLost(notes) outcome {
	healthy, voters, ok := v.quorum()
	if ok {
		return pass()
	}
	for _, m := range v.active() {
		if m.Phase != stewardv1.MemberRunning || v.f.memory() || (m.Pod.Exists && !m.Pod.Failed) {
			continue
		}
		if m.PVC.Foreign {
			return decided(foreignPVC(m))
		}
		if !m.PVC.Exists || m.PVC.Deleting {
			continue
		}
		if !m.Pod.Exists {
			return built(act(CreatePod, m.Name, ReasonMemberPodMissing, "recreating %s's Pod from its PVC to restore quorum", m.Name))
		}
		if !m.Pod.Deleting {
			// Evicted: its etcd never runs again in that Pod, so deleting it costs nobody anything,
			// and only a new Pod on the same PVC can bring its vote back.
			a, _ := v.disrupt(act(DeletePod, m.Name, ReasonMemberPodFailed,
				"deleting %s's Failed Pod so it is recreated on its PVC to restore quorum", m.Name), disruption.Restart)
			return decided(a)
		}
	}
	if v.f.Adopting() && !v.handOverStarted() {
		return pass() // nothing of the source is Steward's yet: the preflight says what it found
	}
	if v.f.Adopting() {
		// Half the voters may be the source's: Steward recovers nothing it does not own.
		return decided(wait(ReasonQuorumLost, "%d of %d voters healthy during an adoption: no membership change and no "+
			"recovery until the source and Steward's members hold quorum again", healthy, voters))
	}
	q := v.quorumEvidence()
	reason, msg := ReasonQuorumLost, fmt.Sprintf("%d of %d voters healthy; %s", healthy, voters, q.Summary(v.order()))
	if q.State == evidence.Held || len(q.Unreachable) > 0 {
		// What the operator cannot reach is not what etcd lost: nothing is done on it.
		reason = ReasonMembersUnreachable
	}
	if !v.f.Etcd.MemberListKnown() {
		msg += "; the member list cannot be read (" + v.f.Etcd.MemberListErr + ")"
	}
	if v.f.memory() {
		msg += "; memory members that lost their Pod lost their data: restore from a backup if they do not return"
	}
	return decided(wait(reason, "%s; no membership change until the operator sees a quorum", msg))
}

// quorum counts healthy voters against the live voter set.
func (v *view) quorum() (healthy, voters int, ok bool) {
	if !v.f.Etcd.MemberListKnown() {
		return 0, 0, false
	}
	for _, l := range v.f.Etcd.Members {
		if l.IsLearner {
			continue
		}
		voters++
		for _, m := range append(slices.Clone(v.members), v.sources...) {
			if m.live != nil && m.live.ID == l.ID && m.healthy() {
				healthy++
			}
		}
	}
	return healthy, voters, voters > 0 && healthy >= voters/2+1
}
