package plan

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/health"
)

// quotaMiB sets every member's reported quota; head sets the revision every endpoint reports.
func quotaMiB(q int64) func(f *Facts) {
	return func(f *Facts) {
		for i := range f.Etcd.Endpoints {
			f.Etcd.Endpoints[i].DBSizeQuota = q * mib
		}
	}
}

func head(rev int64) func(f *Facts) {
	return func(f *Facts) {
		for i := range f.Etcd.Endpoints {
			f.Etcd.Endpoints[i].Revision = rev
		}
	}
}

// compactedTo records Steward's last compaction, and every member defragmented since.
func compactedTo(rev int64) func(f *Facts) {
	return func(f *Facts) {
		f.Cluster.Status.Maintenance = &stewardv1.MaintenanceStatus{LastCompaction: &stewardv1.CompactionRecord{Revision: rev,
			Time: metav1.NewTime(f.Now.Add(-time.Hour))}}
		for _, n := range []string{"c-0", "c-1", "c-2"} {
			f.m(n).Defrag = &stewardv1.MemberDefragmentation{AfterCompaction: rev}
		}
	}
}

// streamed says a running continuous backup has stored every revision up to rev.
func streamed(rev int64) func(f *Facts) {
	return func(f *Facts) { f.ContinuousDurable = rev }
}

func TestPlanNoSpace(t *testing.T) {
	// Quota 100 MiB, every file full; c-0 leads.
	full := all(nospace("c-0"), quotaMiB(100), head(50_000), sizes("c-0", 100, 99), sizes("c-1", 100, 99), sizes("c-2", 100, 99))
	tests := []struct {
		name   string
		n      int32
		mutate func(f *Facts)
		want   want
	}{
		{name: "every file full of live data and history: compact, keeping the newest 1000 revisions", mutate: full,
			want: want{kind: Compact, reason: ReasonRecoveringFromNoSpace, message: "up to revision 49000 of 50000"}},
		{name: "a follower with free pages is defragmented first", mutate: all(full, sizes("c-1", 100, 40), sizes("c-2", 100, 60)),
			want: want{kind: Defragment, member: "c-1", reason: ReasonRecoveringFromNoSpace, disruption: disruption.Defragment}},
		{name: "the leader last, after moving leadership", mutate: all(full, sizes("c-0", 100, 40), sizes("c-1", 30, 30), sizes("c-2", 30, 30)),
			want: want{kind: MoveLeader, member: "c-0", target: "c-1", reason: ReasonMovingLeader}},
		{name: "defragmentation waits for the gate, which lets NOSPACE pass but not a lagging member",
			mutate: all(full, sizes("c-1", 100, 40), func(f *Facts) { f.ep("c-2").ReadOK = false }),
			want:   want{kind: Wait, reason: ReasonWaitingForHealth, message: "to recover from NOSPACE waits for the recovery gate"}},
		{name: "every file under 80% of its quota: disarm", mutate: all(full, sizes("c-0", 79, 70), sizes("c-1", 79, 70), sizes("c-2", 79, 70)),
			want: want{kind: DisarmAlarm, reason: ReasonNoSpaceRecovered, message: "every member's file is under 80% of its quota"}},
		{name: "one file still at 80%: no disarm", mutate: all(full, sizes("c-0", 79, 79), sizes("c-1", 80, 79.0), sizes("c-2", 79, 79)),
			want: want{kind: Compact}},
		{name: "after a compaction every member is defragmented, whatever its free pages say (bbolt keeps them pending while writes are refused)",
			mutate: all(full, compactedTo(49_000), func(f *Facts) {
				f.m("c-0").Defrag.AfterCompaction, f.m("c-1").Defrag.AfterCompaction = 1000, 1000
			}),
			want: want{kind: Defragment, member: "c-1", reason: ReasonRecoveringFromNoSpace, disruption: disruption.Defragment}},
		{name: "keeping 1000 was not enough: compact to the head", mutate: all(full, compactedTo(49_000)),
			want: want{kind: Compact, message: "up to revision 50000 of 50000"}},
		{name: "compacted to the head and still full: only the user can help", mutate: all(full, compactedTo(50_000)),
			want: want{kind: Wait, reason: ReasonQuotaFullOfLiveData, message: "raise spec.options.quotaBackendBytes or delete keys"}},
		{name: "no head revision known: nothing is compacted", mutate: all(full, head(0)),
			want: want{kind: Wait, reason: ReasonRecoveringFromNoSpace, message: "head revision"}},
		{name: "a young cluster compacts to the head at once", mutate: all(full, head(600)),
			want: want{kind: Compact, message: "up to revision 600 of 600"}},
		{name: "an old compaction from an earlier episode does not count", mutate: all(full, compactedTo(10_000)),
			want: want{kind: Compact, message: "up to revision 49000"}},
		// The continuous backup's streamer has made revisions durable to 30000: compacting past it would
		// take revisions it has not stored yet out of every restore.
		{name: "a running continuous backup holds compaction at its durable revision", mutate: all(full, streamed(30_000)),
			want: want{kind: Compact, message: "up to revision 30000 of 50000"}},
		{name: "a continuous backup ahead of the compaction target does not change it", mutate: all(full, streamed(49_500)),
			want: want{kind: Compact, message: "up to revision 49000 of 50000"}},
		{name: "compacted to the durable revision and still full: wait for the streamer", mutate: all(full, compactedTo(30_000), streamed(30_000)),
			want: want{kind: Wait, reason: ReasonRecoveringFromNoSpace, message: "continuous backup"}},
		{name: "Report only says so", mutate: all(full, func(f *Facts) {
			f.Cluster.Spec.Maintenance = &stewardv1.MaintenanceSpec{NoSpace: stewardv1.NoSpaceReport}
		}), want: want{kind: Wait, reason: ReasonWaitingForHealth, message: "NOSPACE alarm raised"}},
		{name: "CORRUPT as well: nothing is compacted or disarmed", mutate: all(full, func(f *Facts) {
			f.Etcd.Alarms = append(f.Etcd.Alarms, health.Alarm{MemberID: f.live("c-2").ID, Type: health.AlarmCorrupt})
		}, hashes("c-0=a", "c-1=a", "c-2=b")), want: want{kind: Wait, reason: ReasonCorruptionNeedsHuman, message: "while other alarms stand"}},
		{name: "a member down is repaired first", mutate: all(full, func(f *Facts) { f.podGone("c-2") }),
			want: want{kind: CreatePod, member: "c-2"}},
		{name: "a member that does not answer holds the recovery", mutate: all(full, func(f *Facts) { f.silence("c-2") }),
			want: want{kind: Wait, reason: ReasonRecoveringFromNoSpace, message: "waits for c-2 to answer"}},
		{name: "a failing member backs off; the next one goes", mutate: all(full, sizes("c-1", 100, 40), sizes("c-2", 100, 50),
			lastDefrag("c-1", stewardv1.DefragmentationFailed, 10*time.Second, 1)),
			want: want{kind: Defragment, member: "c-2", disruption: disruption.Defragment}},
		{name: "a single member with allowDowntime", n: 1, mutate: all(nospace("c-0"), quotaMiB(100), sizes("c-0", 100, 30),
			func(f *Facts) { f.Cluster.Spec.UpdateStrategy.AllowDowntime = true }),
			want: want{kind: Defragment, member: "c-0", disruption: disruption.Defragment}},
		{name: "a single member without it says what blocks", n: 1, mutate: all(nospace("c-0"), quotaMiB(100), sizes("c-0", 100, 30)),
			want: want{kind: Wait, reason: ReasonBlocked, message: "allowDowntime"}},
		{name: "disabled threshold defragmentation does not stop the recovery", mutate: all(full, sizes("c-2", 100, 10),
			defragSpec(func(d *stewardv1.DefragmentationSpec) { d.Enabled = ptr.To(false) })),
			want: want{kind: Defragment, member: "c-2", disruption: disruption.Defragment}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkAction(t, planFor(t, tt.n, "", tt.mutate), tt.want)
		})
	}
}

// The quota etcd 3.5 does not report comes from the member's template, else etcd's 2 GiB default.
func TestNoSpaceQuotaFromTemplate(t *testing.T) {
	d := planFor(t, 3, "", all(nospace("c-0"), sizes("c-0", 1500, 1400), sizes("c-1", 1600, 1400), sizes("c-2", 1500, 1400)))
	if d.Action.Kind != DisarmAlarm {
		t.Fatalf("1600 MiB of the 2 GiB default is under 80%%: %s %s", d.Action, d.Action.Message)
	}
	d = planFor(t, 3, "", all(nospace("c-0"), head(5000), sizes("c-0", 1500, 1450), sizes("c-1", 1500, 1450), sizes("c-2", 1500, 1450),
		func(f *Facts) {
			for i := range f.Members {
				f.Members[i].Template.Options.QuotaBackendBytes = ptr.To(resource.MustParse("1800Mi"))
			}
		}))
	if d.Action.Kind != Compact || !strings.Contains(d.Action.Message, "c-0 1500Mi of 1800Mi") || d.Action.Revision != 4000 {
		t.Fatalf("1500 of 1800 MiB is over 80%%: %s %s", d.Action, d.Action.Message)
	}
}
