package backupplan

import (
	"cmp"
	"fmt"
	"time"
)

// Reasons of an EtcdBackup's Bound condition.
const (
	// ReasonClusterRecorded (True): the backup controller recorded the UID of the EtcdCluster it
	// resolved when it started the backup.
	ReasonClusterRecorded = "ClusterRecorded"
	// ReasonClusterProven (True): a backup from before UIDs were recorded, adopted by the current
	// cluster of its name because it provably came from it.
	ReasonClusterProven = "ClusterProven"
	// ReasonUnbound (False): no UID recorded and no proof whose it is; no cluster counts it.
	ReasonUnbound = "Unbound"
)

// BindCluster is the EtcdCluster named by a backup's spec.clusterName, as it is now.
type BindCluster struct {
	UID       string
	Created   time.Time
	ClusterID string // etcd's cluster ID (hex) in its status; "" before it formed
}

// BindInput is what Bind decides a backup's owner from.
type BindInput struct {
	// RecordedUID is the backup's status.clusterUID, "" on backups from before it was recorded.
	RecordedUID   string
	BackupCreated time.Time
	// BackupClusterID is the etcd cluster ID the snapshot came from (status.clusterID).
	BackupClusterID string
	Cluster         *BindCluster // nil: no EtcdCluster of that name exists
}

// Binding is the EtcdCluster a backup belongs to; Bound exactly when UID is set.
type Binding struct {
	UID     string
	Bound   bool
	Reason  string
	Message string
}

// Bind says which EtcdCluster a backup is of. A recorded UID is the answer, whatever exists now: a
// cluster deleted and recreated under the same name is another cluster. A backup with none (taken
// before Steward recorded it) is adopted by the current cluster of its name only with proof it
// came from it: it was created strictly after the cluster (so the backup controller could only
// have resolved this cluster; only one of a name exists at a time) and its snapshot carries the
// cluster's current etcd cluster ID (derived from the EtcdCluster's UID through the cluster token,
// so a predecessor's cannot match). A backup taken before a reseed minted a new cluster ID has no
// such proof and stays unbound, as does one that never read a cluster ID: unbound backups are
// still restorable by name (spec.bootstrap.restore.backupName), just never counted by a cluster.
func Bind(in BindInput) Binding {
	if in.RecordedUID != "" {
		return Binding{UID: in.RecordedUID, Bound: true, Reason: ReasonClusterRecorded,
			Message: "taken of the EtcdCluster with uid " + in.RecordedUID}
	}
	unbound := func(format string, args ...any) Binding {
		return Binding{Reason: ReasonUnbound, Message: "bound to no cluster: it records no cluster UID and " + fmt.Sprintf(format, args...)}
	}
	c := in.Cluster
	switch {
	case c == nil:
		return unbound("no EtcdCluster of its clusterName exists")
	case !in.BackupCreated.After(c.Created):
		return unbound("it was created before EtcdCluster uid %s was (%s), so it may be a predecessor's", c.UID, stamp(c.Created))
	case in.BackupClusterID == "":
		return unbound("it records no etcd cluster ID to prove it came from EtcdCluster uid %s", c.UID)
	case in.BackupClusterID != c.ClusterID:
		return unbound("its snapshot came from etcd cluster %s, not the cluster's %s (a predecessor's, or from before a reseed)",
			in.BackupClusterID, cmp.Or(c.ClusterID, "none"))
	}
	return Binding{UID: c.UID, Bound: true, Reason: ReasonClusterProven, Message: fmt.Sprintf(
		"adopted by EtcdCluster uid %s: created after it, and its snapshot carries its etcd cluster ID %s", c.UID, c.ClusterID)}
}
