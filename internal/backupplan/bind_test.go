package backupplan

import (
	"strings"
	"testing"
)

func TestBind(t *testing.T) {
	cluster := &BindCluster{UID: "uid-2", Created: at(10, 0), ClusterID: "c2"}
	tests := []struct {
		name    string
		in      BindInput
		uid     string
		bound   bool
		reason  string
		message string
	}{
		{name: "recorded: bound whatever exists now",
			in:  BindInput{RecordedUID: "uid-1", BackupCreated: at(1, 0), Cluster: cluster},
			uid: "uid-1", bound: true, reason: ReasonClusterRecorded, message: "uid-1"},
		{name: "recorded, cluster gone: still bound to it",
			in:  BindInput{RecordedUID: "uid-1", BackupCreated: at(1, 0)},
			uid: "uid-1", bound: true, reason: ReasonClusterRecorded},
		{name: "legacy, provably the current cluster's: adopted",
			in:  BindInput{BackupCreated: at(11, 0), BackupClusterID: "c2", Cluster: cluster},
			uid: "uid-2", bound: true, reason: ReasonClusterProven, message: "etcd cluster ID c2"},
		{name: "legacy, taken before the cluster existed: a predecessor's",
			in:     BindInput{BackupCreated: at(9, 0), BackupClusterID: "c2", Cluster: cluster},
			reason: ReasonUnbound, message: "created before EtcdCluster"},
		{name: "legacy, created the same second as the cluster: no proof",
			in:     BindInput{BackupCreated: at(10, 0), BackupClusterID: "c2", Cluster: cluster},
			reason: ReasonUnbound, message: "created before EtcdCluster"},
		{name: "legacy, another etcd cluster ID (a predecessor, or before a reseed): no proof",
			in:     BindInput{BackupCreated: at(11, 0), BackupClusterID: "c1", Cluster: cluster},
			reason: ReasonUnbound, message: "etcd cluster c1, not the cluster's c2"},
		{name: "legacy, no etcd cluster ID recorded (it failed): no proof",
			in:     BindInput{BackupCreated: at(11, 0), Cluster: cluster},
			reason: ReasonUnbound, message: "records no etcd cluster ID"},
		{name: "legacy, the cluster has not formed: no proof",
			in:     BindInput{BackupCreated: at(11, 0), BackupClusterID: "c2", Cluster: &BindCluster{UID: "uid-2", Created: at(10, 0)}},
			reason: ReasonUnbound, message: "etcd cluster c2, not the cluster's none"},
		{name: "legacy, no cluster of that name",
			in:     BindInput{BackupCreated: at(11, 0), BackupClusterID: "c2"},
			reason: ReasonUnbound, message: "no EtcdCluster"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := Bind(tt.in)
			if b.UID != tt.uid || b.Bound != tt.bound || b.Reason != tt.reason || !strings.Contains(b.Message, tt.message) {
				t.Errorf("Bind = %+v, want uid %q bound %v %s %q", b, tt.uid, tt.bound, tt.reason, tt.message)
			}
			if b.Bound != (b.UID != "") {
				t.Errorf("bound %v with uid %q", b.Bound, b.UID)
			}
		})
	}
}

// TestBindNeverAdoptsAPredecessor: whatever a legacy backup recorded, a cluster created after it
// never adopts it.
func TestBindNeverAdoptsAPredecessor(t *testing.T) {
	for _, id := range []string{"", "c1", "c2"} {
		for _, h := range []int{0, 5, 9, 10} {
			b := Bind(BindInput{BackupCreated: at(h, 0), BackupClusterID: id, Cluster: &BindCluster{UID: "u", Created: at(10, 0), ClusterID: "c2"}})
			if b.Bound {
				t.Errorf("backup created at %d:00 with cluster ID %q adopted by a cluster created at 10:00: %+v", h, id, b)
			}
		}
	}
}
