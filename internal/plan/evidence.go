package plan

import (
	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/evidence"
)

// quorumEvidence judges etcd's quorum from what each voter showed (internal/evidence): the
// operator reaching too few members is not evidence that etcd lost quorum.
func (v *view) quorumEvidence() evidence.Quorum {
	var voters []evidence.Voter
	if v.f.Etcd.MemberListKnown() {
		for _, l := range v.f.Etcd.Members {
			if l.IsLearner {
				continue
			}
			m := v.byID(l.ID)
			if m == nil {
				// A voter no EtcdMember claims: nobody answers for it, and nothing shows it lost.
				voters = append(voters, evidence.Voter{Name: orphanName(l.ID), Err: "no EtcdMember claims it"})
				continue
			}
			voters = append(voters, v.voterEvidence(m))
		}
	} else {
		// Without a member list (it needs quorum), the voters are those the operator recorded.
		for _, m := range v.recordedVoters() {
			voters = append(voters, v.voterEvidence(m))
		}
	}
	return evidence.JudgeQuorum(voters)
}

// recordedVoters are the members the operator last saw as voters: Running, not being replaced.
func (v *view) recordedVoters() []*memberView {
	var out []*memberView
	for _, m := range v.active() {
		if m.Phase == stewardv1.MemberRunning && !m.Replacing {
			out = append(out, m)
		}
	}
	return out
}

func (v *view) byID(id uint64) *memberView {
	for _, m := range v.members {
		if m.live != nil && m.live.ID == id {
			return m
		}
	}
	return nil
}

// voterEvidence is one member's evidence: its etcd's answer, its kubelet's and its node's report,
// and whether its data still exists.
func (v *view) voterEvidence(m *memberView) evidence.Voter {
	e := evidence.Voter{Name: m.Name, NodeGone: m.Pod.Exists && m.Pod.NodeGone, DataGone: v.dataGone(m)}
	switch {
	case m.ep != nil && m.ep.Reachable:
		e.Answered, e.HasLeader, e.ReadOK = true, m.ep.LeaderID != 0, m.ep.ReadOK
	case m.ep != nil:
		e.Err = firstNonEmpty(m.ep.Err, "no answer")
	case !m.Pod.Exists:
		e.Err = "it has no Pod"
	default:
		e.Err = "its Pod has no address"
	}
	// Only a Ready node's kubelet reports the container as it is now.
	e.ContainerDown = m.Pod.Exists && !m.Pod.Deleting && m.Pod.NodeReady && m.Pod.Stopped
	return e
}

// dataGone says why the member's data no longer exists, or "" when it may.
func (v *view) dataGone(m *memberView) string {
	switch {
	case m.Pod.Exists && m.Pod.DataLost != "":
		return "the data check refused its directory: " + m.Pod.DataLost
	case v.f.memory() && (!m.Pod.Exists || m.Pod.Failed):
		return "its Pod is gone, and its data in memory with it"
	case !v.f.memory() && (!m.PVC.Exists || m.PVC.Deleting):
		return "its PVC is gone"
	}
	return ""
}

// order are the member names by ordinal, for messages.
func (v *view) order() []string {
	var out []string
	for _, m := range v.members {
		out = append(out, m.Name)
	}
	for _, o := range v.orphans {
		out = append(out, orphanName(o.ID))
	}
	for _, s := range v.sources {
		out = append(out, s.Name)
	}
	return out
}
