package plan

// etcd's backend sizes in the simulator, for NOSPACE sequences: each etcd entry has a file (db), the
// part of it in use as etcd reports it (inUse), and the live data a compaction would leave (live).
// As in bbolt, pages a compaction freed stay counted in use until the member is defragmented. A world
// whose spaceQuota is 0 reports no sizes at all, as every other sequence has it.

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/health"
)

// spaceFacts fills an endpoint's sizes, quota and head revision when the world models space.
func (w *world) spaceFacts(e *wEtcd, ep *health.Endpoint) {
	if w.spaceQuota == 0 {
		return
	}
	ep.DBSize, ep.DBSizeInUse, ep.DBSizeQuota, ep.Revision = e.db, e.inUse, w.spaceQuota, int64(w.index)
}

// compacted: history up to the revision is gone on every member; the pages stay in use until each
// member is defragmented. The controller records the compaction in status.
func (w *world) compacted(a Action) {
	if w.spaceQuota == 0 {
		return
	}
	for _, e := range w.etcd {
		e.live /= 2
	}
	if w.cluster.Status.Maintenance == nil {
		w.cluster.Status.Maintenance = &stewardv1.MaintenanceStatus{}
	}
	w.cluster.Status.Maintenance.LastCompaction = &stewardv1.CompactionRecord{Revision: a.Revision,
		HeadRevision: a.HeadRevision, Time: metav1.NewTime(w.now)}
}

// defragmented: the member's file shrinks to its live data, and the controller records the result.
func (w *world) defragmented(m *wMember, e *wEtcd) {
	if w.spaceQuota == 0 {
		return
	}
	e.db, e.inUse = e.live, e.live
	var after int64
	if s := w.cluster.Status.Maintenance; s != nil && s.LastCompaction != nil {
		after = s.LastCompaction.Revision
	}
	now := metav1.NewTime(w.now)
	m.ev.defrag = &stewardv1.MemberDefragmentation{LastSucceeded: &now, AfterCompaction: after,
		Last: &stewardv1.DefragmentationResult{Time: now, Outcome: stewardv1.DefragmentationSucceeded}}
}

// TestSequenceNoSpaceRecovered: every member's file at its quota, 2% free, NOSPACE raised. The
// planner compacts (nothing to gain by defragmenting first), defragments each member once, one at a
// time through the chokepoint and the leader last, then disarms; nobody restarts.
func TestSequenceNoSpaceRecovered(t *testing.T) {
	for _, med := range media {
		t.Run(mediumName(med), func(t *testing.T) {
			w := formedWorld(t, 3, med)
			leader := w.entryByID(w.leader).name
			w.spaceQuota = 100 * mib
			for _, e := range w.etcd {
				e.db, e.inUse, e.live = 100*mib, 98*mib, 98*mib
			}
			w.alarm = true
			w.converge(nil)
			var kinds []string
			defragged := map[string]int{}
			for _, ev := range w.events {
				if ev.kind == MoveLeader {
					continue
				}
				kinds = append(kinds, string(ev.kind))
				if ev.kind == Defragment {
					defragged[ev.member]++
				}
			}
			want := []string{"Compact", "Defragment", "Defragment", "Defragment", "DisarmAlarm"}
			if len(kinds) != len(want) {
				t.Fatalf("events %v, want %v\n%s", kinds, want, w.tail(40))
			}
			for i := range want {
				if kinds[i] != want[i] {
					t.Fatalf("events %v, want %v\n%s", kinds, want, w.tail(40))
				}
			}
			if len(defragged) != 3 {
				t.Errorf("defragmented %v, want each of the 3 members once", defragged)
			}
			if last := w.events[len(w.events)-2]; last.member != leader {
				t.Errorf("the last defragmented member is %s; the leader %s goes last", last.member, leader)
			}
			if w.alarm {
				t.Errorf("NOSPACE is still raised")
			}
			for _, e := range w.etcd {
				if e.db >= 80*mib {
					t.Errorf("%s's file is %d MiB after the recovery", e.name, e.db/mib)
				}
			}
			for _, m := range w.members {
				if m.pod.restarts > 0 {
					t.Errorf("%s restarted %d times: NOSPACE recovery restarts nobody", m.name, m.pod.restarts)
				}
			}
		})
	}
}
