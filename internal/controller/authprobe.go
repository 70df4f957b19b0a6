package controller

import (
	"context"
	"fmt"
	"time"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// authProbeEvery is how often Steward asks a cluster without spec.auth whether etcd has
// authentication on. Such a cluster is rare (a backup taken with auth on restored under another
// spec, or auth turned on by hand with etcdctl), so one request per cluster every few minutes is
// all it costs the many that are not; a new cluster ID (a restore) asks at once.
const authProbeEvery = 5 * time.Minute

// authProbe is the last answer for one cluster.
type authProbe struct {
	clusterID string
	at        time.Time
	on        bool
}

// undeclaredAuthOn says whether etcd has authentication on in a cluster without spec.auth, so
// status can say so (phase Undeclared): the shared client's certificate and backups may be refused
// while Steward shows nothing wrong. It only reads; Steward changes nothing about auth it was not
// asked to manage. An unanswered request keeps the last answer for the same cluster ID.
func (r *EtcdClusterReconciler) undeclaredAuthOn(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed) bool {
	if o.client == nil || ec.Status.ClusterID == "" {
		return false
	}
	now := r.now()
	var last authProbe
	if v, ok := r.authProbes.Load(ec.UID); ok {
		last = v.(authProbe)
		if last.clusterID != ec.Status.ClusterID {
			last = authProbe{}
		} else if now.Sub(last.at) < authProbeEvery {
			return last.on
		}
	}
	if o.facts.Etcd.MemberListErr != "" {
		return last.on // asked again once a quorum answers (noQuorumRead)
	}
	on, err := o.client.AuthEnabled(ctx)
	if err != nil {
		return last.on
	}
	r.authProbes.Store(ec.UID, authProbe{clusterID: ec.Status.ClusterID, at: now, on: on})
	return on
}

// noQuorumRead is why etcd's auth state is not read in a reconcile whose member list failed: its
// reads go through a quorum, so without one each waits out its timeout (5 s), on every reconcile
// of the outage, and the repair that could bring quorum back (a Pod recreated on its PVC) came a
// reconcile later for it (a replay of chaos seed 3: a deleted Pod recreated 12.1 s after it went).
func noQuorumRead(memberListErr string) error {
	return fmt.Errorf("not read while the member list cannot be (%s)", memberListErr)
}
