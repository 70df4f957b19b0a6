package plan

import (
	"slices"
	"strconv"
)

// identity holds everything while etcd answers as another cluster, or an endpoint as another member,
// than the one Steward believes it reached. A Pod IP reused by another etcd, a Service routing across
// clusters, or a data directory restored from elsewhere all look like this; acting on such facts
// would remove, replace or wipe members on evidence about someone else's cluster.
func (v *view) identity() (Action, bool) {
	want := v.f.Cluster.Status.ClusterID
	if want == "" {
		return Action{}, false // not formed yet: the first member list latches it
	}
	if got := v.f.EtcdClusterID; got != "" && got != want {
		return wait(ReasonClusterIdentityMismatch, "the member list came from etcd cluster %s, but this cluster is %s "+
			"(status.clusterID): nothing is changed until they match; check that the client Service and the "+
			"member Pods reach this cluster's etcd", got, want), true
	}
	for _, m := range append(slices.Clone(v.members), v.sources...) {
		e := m.ep
		if e == nil || !e.Reachable {
			continue
		}
		if e.ClusterID != 0 && strconv.FormatUint(e.ClusterID, 16) != want {
			return wait(ReasonClusterIdentityMismatch, "%s's endpoint answered as a member of etcd cluster %x, but this cluster is "+
				"%s: nothing is changed until it matches", m.Name, e.ClusterID, want), true
		}
		if m.live != nil && e.MemberID != 0 && e.MemberID != m.live.ID {
			return wait(ReasonClusterIdentityMismatch, "%s's endpoint answered as member %x, but the member list has %s as %x: "+
				"nothing is changed until they match", m.Name, e.MemberID, m.Name, m.live.ID), true
		}
	}
	return Action{}, false
}
