// Package disruption is the one chokepoint through which Steward disrupts an etcd member: deleting
// its Pod, removing it from etcd (which is how a member is replaced), or deleting its data.
//
// Invariant 1 (docs/design.md) (one disruption at a time) is enforced here and nowhere else, so it
// is structural rather than something every code path has to remember. No other package may delete a
// member's Pod or PVC or call MemberRemove: the controller hands its side-effect functions to a
// Disrupter, and the Disrupter calls them only after Check passed on facts read in the same reconcile.
// The PodDisruptionBudget does not protect against the operator (it gates evictions only), so this
// check is the only protection there is.
//
// Check is pure: no clients, no clock. The planner calls it too, so it never proposes a disruption
// the Disrupter would refuse, and it reports the refusal as the reason it waits.
package disruption

import (
	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// Kind is what a disruption does to its victim.
type Kind string

const (
	// Restart deletes the member's Pod; it comes back with the same member ID and data (PVC storage).
	Restart Kind = "Restart"
	// Remove removes the member from etcd for good (MemberRemove): a scale-down, a stuck learner, a
	// member nobody owns. The voter set shrinks, and so does its quorum.
	Remove Kind = "Remove"
	// Replace removes the member from etcd in order to add a fresh one in its place (a memory
	// member's roll, a member whose data is lost or that crash-loops). The cluster is meant to keep
	// its size, so the check treats the victim as a voter that is down, like a restart: a cluster
	// that cannot lose one voter cannot replace one either.
	Replace Kind = "Replace"
	// DeleteData deletes the PVC of a member that is no longer in etcd (its data is stale).
	DeleteData Kind = "DeleteData"
	// RestartContainer restarts the member's etcd container in its running Pod on a new image (the
	// kubelet restarts a container whose image changed): the Pod, its IP and its volumes stay, so a
	// memory member keeps its data too. It serves nothing meanwhile, so it counts as down.
	RestartContainer Kind = "RestartContainer"
	// Defragment asks the member to defragment its backend: it keeps its data and its place, but
	// serves no read or write until done, so it counts as down like a restart.
	Defragment Kind = "Defragment"
	// ReplaceLost is a Replace of a member lost with its node (or its node-local volume's node):
	// removed from etcd first, its successor joins under a new name elsewhere. It needs etcd's own
	// evidence of the loss on the very read it acts on (Member.Lost), so a member that came back
	// between the plan and the act is not removed.
	ReplaceLost Kind = "ReplaceLost"
	// Fence deletes a Pod during a quorum recovery: every member but the survivor is fenced, and
	// the survivor itself restarts twice (with --force-new-cluster, then without). Quorum is
	// already lost, so no member serves and one-at-a-time has nothing left to protect; the
	// recovery was asked for (annotation or spec.quorumLoss Automatic) and recorded in status.
	// Allowed only while Cluster.Recovering says a recovery is in progress.
	Fence Kind = "Fence"
	// Dormant deletes a Pod of a PVC cluster scaled to zero: a full outage the user asked for. The
	// members and their data stay; scaling up recreates the Pods.
	Dormant Kind = "Dormant"
	// Evict prepares a member for an eviction Kubernetes was asked for (a node drain): it leaves
	// the client Service (the Drainer) and is marked prepared; Kubernetes then deletes its Pod. It
	// counts as down from here on (Member.Evicting), like a restart, and is checked like one.
	Evict Kind = "Evict"
)

// Member is one member as the check sees it. The planner builds these from live reads.
type Member struct {
	Name string
	ID   uint64 // etcd member ID; 0 when the member is not in the live member list
	// Voter and Learner say how the live member list lists it; both false when it is not listed.
	Voter   bool
	Learner bool
	// Leader is true when the endpoints agree this member leads.
	Leader bool
	// Healthy is etcd's view: its endpoint answered, is healthy, and its applied index caught up with
	// the leader's. A member replaying its log is not ready yet. Pod readiness alone never counts.
	Healthy bool
	// Pod facts. PodFailed: the Pod's phase is Failed; its containers never run again.
	PodExists, PodReady, PodDeleting, PodFailed bool
	// InFlight is true while a step of the operator is under way on this member (joining, learner,
	// out of etcd on its way out): it is disrupted even if its Pod looks fine.
	InFlight bool
	// Replacing is true from the moment the member is removed to be replaced until its successor is
	// a voter again: the cluster is a voter short, so it counts as disrupted although etcd no longer
	// lists it.
	Replacing bool
	// Evicting is true while the member is prepared for an eviction (out of the client Service,
	// waiting for Kubernetes to evict its Pod): it is disrupted even though its etcd still serves.
	Evicting bool
	// Lost: etcd's leader does not hear the member and its node (or its volume's node) is lost,
	// long enough for spec.nodeLoss (internal/evidence.JudgeNodeLoss): ReplaceLost may take it.
	Lost bool
}

// undisrupted: the member counts towards what the cluster can lose: a voter etcd reports healthy and
// caught up with the leader, its Pod ready and staying, no step of the operator in flight on it (see
// InFlight). It is stricter than the planner's readyVoter, which does not ask for the applied
// index to have caught up.
func (m Member) undisrupted() bool {
	return m.Voter && m.Healthy && m.PodExists && m.PodReady && !m.PodDeleting && !m.InFlight && !m.Evicting
}

// Cluster is the whole cluster as the check sees it.
type Cluster struct {
	Members []Member
	Medium  stewardv1.StorageMedium
	// AllowDowntime is spec.updateStrategy.allowDowntime: a single PVC member may be restarted.
	AllowDowntime bool
	// Dormant is true when spec.replicas is 0.
	Dormant bool
	// MemberListKnown is false when the live member list could not be read (quorum lost, or etcd
	// unreachable): nothing can then be proven safe.
	MemberListKnown bool
	// NeverFormed is true while no etcd cluster exists yet (no cluster ID, no member ever listed):
	// a Pod then holds no member and no data anyone depends on.
	NeverFormed bool
	// Recovering: a quorum recovery is in progress (status records it before any Pod is fenced).
	Recovering bool
	// QuorumShown: etcd shows quorum (a member answers with a leader, or a linearizable read
	// succeeds) while the recovery could still be abandoned: fencing would destroy a quorum.
	QuorumShown bool
}

// Request names a disruption.
type Request struct {
	Kind   Kind
	Victim string
}

func (c Cluster) member(name string) (Member, bool) {
	for _, m := range c.Members {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

func (c Cluster) voters() []Member {
	var out []Member
	for _, m := range c.Members {
		if m.Voter {
			out = append(out, m)
		}
	}
	return out
}

// Check says whether the request may go ahead now; a refusal is a *Refusal saying why.
func Check(c Cluster, r Request) error {
	v, ok := c.member(r.Victim)
	if !ok {
		return refuse(ReasonUnknownMember, r, "", "no member is named %q", r.Victim)
	}
	switch r.Kind {
	case DeleteData:
		return checkDeleteData(c, r, v)
	case Dormant:
		return checkDormant(c, r, v)
	case Fence:
		if !c.Recovering {
			return refuse(ReasonNoQuorumRecovery, r, v.Name, "no quorum recovery is in progress: a Pod is fenced only during one")
		}
		if c.QuorumShown {
			return refuse(ReasonQuorumShown, r, v.Name, "etcd shows quorum again: the recovery is abandoned, not carried on")
		}
		return nil
	case ReplaceLost:
		if !v.Lost {
			return refuse(ReasonLossNotShown, r, v.Name, "etcd's evidence that %s is lost with its node is gone: it is not replaced", v.Name)
		}
		return checkMember(c, r, v)
	case Restart, RestartContainer, Remove, Replace, Defragment, Evict:
		return checkMember(c, r, v)
	}
	return refuse(ReasonUnknownDisruption, r, "", "unknown disruption kind %q", r.Kind)
}

// checkDeleteData: data may go only once etcd no longer counts the member, which only the live member
// list can prove.
func checkDeleteData(c Cluster, r Request, v Member) error {
	if !c.MemberListKnown {
		return refuse(ReasonMemberListUnknown, r, "", "cannot prove %s left etcd: the member list is unreadable", v.Name)
	}
	if v.Voter || v.Learner {
		return refuse(ReasonStillAMember, r, v.Name, "%s is still in the member list; remove it first", v.Name)
	}
	return nil
}

// checkDormant: going dormant is a chosen outage for PVC clusters only; Pods go followers first so
// the leader is never killed while followers still depend on it.
func checkDormant(c Cluster, r Request, v Member) error {
	if !c.Dormant {
		return refuse(ReasonNotDormant, r, "", "spec.replicas is not 0")
	}
	if c.Medium == stewardv1.StorageMediumMemory {
		return refuse(ReasonMemoryDataWouldBeLost, r, v.Name, "a memory-backed member loses its data with its Pod")
	}
	if v.Leader {
		for _, m := range c.Members {
			if m.Name != v.Name && m.PodExists && !m.PodDeleting {
				return refuse(ReasonVictimIsLeader, r, v.Name, "%s leads; its Pod goes last (%s still runs)", v.Name, m.Name)
			}
		}
	}
	return nil
}

func checkMember(c Cluster, r Request, v Member) error {
	if c.NeverFormed && r.Kind == Restart && !v.Voter && !v.Learner {
		return nil // a seed that never formed a cluster: rebuilding it disrupts nobody
	}
	if r.Kind == Restart && v.PodFailed && c.Medium != stewardv1.StorageMediumMemory {
		return nil // its etcd is not running and never will in that Pod; the PVC keeps the data
	}
	if !c.MemberListKnown {
		return refuse(ReasonMemberListUnknown, r, "", "the member list is unreadable, so no disruption can be proven safe")
	}
	if !v.Voter && !v.Learner {
		if r.Kind == Defragment {
			return refuse(ReasonNotAMember, r, v.Name, "%s is not in etcd's member list: there is nothing to defragment", v.Name)
		}
		// Not (or no longer) in etcd: its Pod serves nobody, and there is nothing to remove.
		return nil
	}
	if v.Learner {
		// A learner never counts towards quorum; removing or restarting it costs nothing.
		return nil
	}
	if r.Kind == Restart && c.Medium == stewardv1.StorageMediumMemory {
		return refuse(ReasonMemoryDataWouldBeLost, r, v.Name,
			"%s keeps its data in memory: deleting its Pod loses it; remove and replace the member instead", v.Name)
	}
	voters := c.voters()
	if len(voters) == 1 {
		return checkSingle(c, r, v)
	}
	if v.Leader {
		return refuse(ReasonVictimIsLeader, r, v.Name, "%s leads; move leadership to another voter first", v.Name)
	}
	if err := checkOthers(c, r, v); err != nil {
		return err
	}
	return checkQuorum(voters, r, v)
}

func checkSingle(c Cluster, r Request, v Member) error {
	if (r.Kind == Replace || r.Kind == ReplaceLost) && c.Medium == stewardv1.StorageMediumMemory {
		return refuse(ReasonMemoryDataWouldBeLost, r, v.Name,
			"%s is the only member and keeps its data in memory: replacing it would lose all data", v.Name)
	}
	if r.Kind == Defragment {
		if c.AllowDowntime {
			return nil // memory storage too: a defragmentation keeps the data
		}
		return refuse(ReasonSingleMemberNeedsOptIn, r, v.Name,
			"%s is the only member: defragmenting it stops every read and write until done; set spec.updateStrategy.allowDowntime to accept it", v.Name)
	}
	if r.Kind == RestartContainer {
		if c.AllowDowntime {
			return nil // memory storage too: the Pod and its volumes stay
		}
		return refuse(ReasonSingleMemberNeedsOptIn, r, v.Name,
			"%s is the only member: restarting it is a full outage; set spec.updateStrategy.allowDowntime to accept it", v.Name)
	}
	if r.Kind == Remove || r.Kind == Replace || r.Kind == ReplaceLost {
		return refuse(ReasonLastMember, r, v.Name, "%s is the only voter; etcd cannot remove its last member", v.Name)
	}
	if c.Medium == stewardv1.StorageMediumDefault && c.AllowDowntime {
		return nil
	}
	return refuse(ReasonSingleMemberNeedsOptIn, r, v.Name,
		"%s is the only member: restarting it is a full outage; set spec.updateStrategy.allowDowntime to accept it", v.Name)
}

// checkOthers: one disruption at a time. Any other member that is not a fully available voter means a
// disruption (ours or not) is already under way; so does a member removed to be replaced that is
// not a voter again yet. One exception keeps the cluster from deadlocking: a victim that is down
// already may go while another member is being replaced, because taking it adds no unavailability
// (and etcd refuses to add the replacement while a voter it cannot reach is listed). The quorum
// projection still decides.
func checkOthers(c Cluster, r Request, victim Member) error {
	for _, m := range c.Members {
		if m.Name == r.Victim {
			continue
		}
		switch {
		case m.Learner:
			return refuse(ReasonLearnerPresent, r, m.Name, "learner %s must be promoted or removed first", m.Name)
		case !m.Voter && m.Replacing && victim.undisrupted():
			return refuse(ReasonOtherMemberDisrupted, r, m.Name, "%s is already disrupted (%s)", m.Name, describe(m))
		case !m.Voter:
			continue // an object not in etcd (pending creation) carries no data and no vote
		case !m.PodExists || m.PodDeleting || m.InFlight || m.Evicting:
			return refuse(ReasonOtherMemberDisrupted, r, m.Name, "%s is already disrupted (%s)", m.Name, describe(m))
		case !m.undisrupted():
			return refuse(ReasonOtherMemberNotReady, r, m.Name, "%s is not ready (%s)", m.Name, describe(m))
		}
	}
	return nil
}

// checkQuorum projects the cluster after the disruption, the way cluster-api's
// targetEtcdClusterHealthy does: a removal shrinks the voter set (and its quorum); a restart or a
// replacement keeps the voter set and counts the victim as down. Enough healthy voters must remain
// for that quorum.
func checkQuorum(voters []Member, r Request, v Member) error {
	target := len(voters)
	if r.Kind == Remove {
		target--
	}
	healthy := 0
	for _, m := range voters {
		if m.Name != v.Name && m.undisrupted() {
			healthy++
		}
	}
	quorum := target/2 + 1
	if healthy < quorum {
		return refuse(ReasonQuorumAtRisk, r, v.Name,
			"%s of %s would leave %d healthy of %d voters, below quorum %d", r.Kind, v.Name, healthy, target, quorum)
	}
	return nil
}

func describe(m Member) string {
	switch {
	case !m.Voter && !m.Learner && m.Replacing:
		return "removed for replacement: not a voter yet"
	case !m.PodExists:
		return "Pod missing"
	case m.PodDeleting:
		return "Pod terminating"
	case m.InFlight:
		return "a membership step is under way"
	case m.Evicting:
		return "prepared for its eviction"
	case !m.PodReady:
		return "Pod not ready"
	default:
		return "etcd endpoint unhealthy"
	}
}
