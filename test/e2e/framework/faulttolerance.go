package framework

import (
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// VoterProbe is what one voter (as a member list named it) answered to a linearizable read.
type VoterProbe struct {
	Name string
	Err  error
}

// FaultTolerance is how many more voters could fail with the cluster still serving, judged from one
// probe of every voter: the voters that answered a linearizable read, less a quorum. A voter that
// refuses the read as a learner has not applied its own promotion yet while the member list already
// shows it (the list came from a member that applied it first): raft counts it a voter from the
// leader's apply on, but its answer straddles the promotion, so the sample says nothing either way
// and ok is false, as for a sample whose member list changed under it. unhealthy names the voters
// that failed the read, each with its error.
func FaultTolerance(probes []VoterProbe) (ft int, unhealthy []string, ok bool) {
	healthy := 0
	for _, p := range probes {
		switch {
		case p.Err == nil:
			healthy++
		case rpctypes.ErrorDesc(p.Err) == rpctypes.ErrorDesc(rpctypes.ErrGRPCNotSupportedForLearner):
			return 0, nil, false
		default:
			unhealthy = append(unhealthy, fmt.Sprintf("%s: %v", p.Name, p.Err))
		}
	}
	return healthy - (len(probes)/2 + 1), unhealthy, true
}

// ClusterFaultTolerance is how many of voters can fail with the rest still a quorum.
func ClusterFaultTolerance(voters int) int {
	if voters < 1 {
		return 0
	}
	return (voters - 1) / 2
}

// AdoptionFaultTolerance is the fault tolerance an adoption of a source of sourceMembers voters
// into replicas members must keep at every moment: the smaller of the two clusters' own. Steward
// never lets the voter count drop below min(sourceMembers, replicas) (docs/adopt.md), and fault
// tolerance only grows with the voters, so the cluster tolerates at least what the smaller side
// does: 3 into 3 and 5 into 3 keep 1, 1 into 3 keeps 0 (it never loses quorum, and has no more
// to lose while the single source member serves alone or beside one Steward member).
func AdoptionFaultTolerance(sourceMembers, replicas int) int {
	return ClusterFaultTolerance(min(sourceMembers, replicas))
}
