package plan

import (
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/health"
)

// corrupt raises CORRUPT naming the given members, as etcd's periodic check does (the leader names
// the follower whose hash differs from its own).
func corrupt(names ...string) func(f *Facts) {
	return func(f *Facts) {
		for _, n := range names {
			f.Etcd.Alarms = append(f.Etcd.Alarms, health.Alarm{MemberID: f.live(n).ID, Type: health.AlarmCorrupt})
		}
	}
}

// corruptUnnamed raises CORRUPT with member ID 0, as etcd's compaction hash check does when it
// finds no majority among the hashes it compared.
func corruptUnnamed(f *Facts) {
	f.Etcd.Alarms = append(f.Etcd.Alarms, health.Alarm{MemberID: 0, Type: health.AlarmCorrupt})
}

// hashes records the voters' HashKV answers as the controller reads them under CORRUPT, one
// "name=hash" pair each: a hash word at revision 100 compacted at 50, "word@60" compacted at 60
// instead, "-" for no answer.
func hashes(pairs ...string) func(f *Facts) {
	return func(f *Facts) {
		f.Etcd.Hashes = nil
		for _, p := range pairs {
			name, val, _ := strings.Cut(p, "=")
			h := health.MemberHash{Member: name, MemberID: f.live(name).ID, Revision: 100, CompactRevision: 50}
			if val == "-" {
				h = health.MemberHash{Member: name, Err: "context deadline exceeded"}
				f.Etcd.Hashes = append(f.Etcd.Hashes, h)
				continue
			}
			word, compact, ok := strings.Cut(val, "@")
			if ok {
				h.CompactRevision, _ = strconv.ParseInt(compact, 10, 64)
			}
			n, _ := strconv.ParseUint(word, 16, 32)
			h.Hash = uint32(n)
			f.Etcd.Hashes = append(f.Etcd.Hashes, h)
		}
	}
}

// replaced is c-2 removed from etcd for replacement and cleaned up, its successor not added yet; the
// CORRUPT alarm still stands (it names c-2's old ID, or 0).
func replaced(name string) func(f *Facts) {
	return func(f *Facts) {
		f.dropLive(name)
		m := f.m(name)
		m.Phase, m.ID, m.Replacing, m.Pod, m.PVC = stewardv1.MemberPending, "", true, Pod{}, PVC{}
	}
}

// c-0 leads healthyFacts' clusters. The alarm never decides who is replaced: the hashes do.
func TestPlanCorruption(t *testing.T) {
	agree3 := hashes("c-0=a", "c-1=a", "c-2=a")
	tests := []struct {
		name   string
		n      int32
		mutate func(f *Facts)
		want   want
	}{
		{name: "a follower in the minority, named by the alarm: replaced", mutate: all(corrupt("c-2"), hashes("c-0=a", "c-1=a", "c-2=b")),
			want: want{kind: RemoveMember, member: "c-2", reason: ReasonMemberCorrupt, disruption: disruption.Replace, message: "c-2 hash 0000000b"}},
		{name: "the leader in the minority, a healthy follower named: leadership moves off the leader",
			mutate: all(corrupt("c-2"), hashes("c-0=b", "c-1=a", "c-2=a")),
			want:   want{kind: MoveLeader, member: "c-0", target: "c-1", reason: ReasonMovingLeader}},
		{name: "the leader in the minority after leadership moved: the old leader is replaced, not the named follower",
			mutate: all(corrupt("c-2"), hashes("c-0=b", "c-1=a", "c-2=a"), func(f *Facts) { f.lead("c-1") }),
			want:   want{kind: RemoveMember, member: "c-0", reason: ReasonMemberCorrupt, disruption: disruption.Replace}},
		{name: "alarm with member ID 0 and a minority: the minority is replaced", mutate: all(corruptUnnamed, hashes("c-0=a", "c-1=a", "c-2=b")),
			want: want{kind: RemoveMember, member: "c-2", reason: ReasonMemberCorrupt, disruption: disruption.Replace}},
		{name: "alarm with member ID 0 and no majority: nothing is touched", mutate: all(corruptUnnamed, hashes("c-0=a", "c-1=b", "c-2=c")),
			want: want{kind: Wait, reason: ReasonCorruptionNeedsHuman, message: "no strict majority of the 3 voters"}},
		{name: "alarm with member ID 0, hashes agree: never disarmed for a member that is not there",
			mutate: all(corruptUnnamed, agree3), want: want{kind: Wait, reason: ReasonCorruptionNeedsHuman, message: "all 3 voters agree"}},
		{name: "the named member agrees with the others: nothing is touched", mutate: all(corrupt("c-2"), agree3),
			want: want{kind: Wait, reason: ReasonCorruptionNeedsHuman, message: "all 3 voters agree"}},
		{name: "one unanswered and two differing: no majority", mutate: all(corrupt("c-2"), hashes("c-0=a", "c-1=b", "c-2=-")),
			want: want{kind: Wait, reason: ReasonCorruptionNeedsHuman, message: "c-2: no hash (context deadline exceeded)"}},
		{name: "no hash read at all: nothing is touched", mutate: corrupt("c-2"),
			want: want{kind: Wait, reason: ReasonCorruptionNeedsHuman, message: "no member answered HashKV"}},
		{name: "the odd member at another compaction point cannot be compared: nothing is touched",
			mutate: all(corrupt("c-2"), hashes("c-0=a", "c-1=a", "c-2=b@60")),
			want:   want{kind: Wait, reason: ReasonCorruptionNeedsHuman, message: "c-2 hash 0000000b at revision 100 (compacted at 60)"}},
		{name: "two members named: the hashes still decide", mutate: all(corrupt("c-1", "c-2"), hashes("c-0=a", "c-1=a", "c-2=b")),
			want: want{kind: RemoveMember, member: "c-2", reason: ReasonMemberCorrupt, disruption: disruption.Replace}},
		{name: "the alarm is raised once per detecting member: still one replaced", mutate: all(corrupt("c-1", "c-1"), hashes("c-0=a", "c-1=b", "c-2=a")),
			want: want{kind: RemoveMember, member: "c-1", disruption: disruption.Replace}},
		{name: "the others not all healthy: nothing is touched",
			mutate: all(corrupt("c-2"), hashes("c-0=a", "c-1=a", "c-2=b"), func(f *Facts) { f.ep("c-1").ReadOK = false }),
			want:   want{kind: Wait, reason: ReasonCorruptionNeedsHuman, message: "only while the others agree"}},
		{name: "a 2-member cluster has no majority against either copy", n: 2, mutate: all(corrupt("c-1"), hashes("c-0=a", "c-1=b")),
			want: want{kind: Wait, reason: ReasonCorruptionNeedsHuman, message: "no strict majority of the 2 voters"}},
		{name: "5 voters, two different minorities: one replaced at a time", n: 5,
			mutate: all(corrupt("c-4"), hashes("c-0=a", "c-1=b", "c-2=a", "c-3=c", "c-4=a")),
			want:   want{kind: RemoveMember, member: "c-1", reason: ReasonMemberCorrupt, disruption: disruption.Replace}},
		{name: "5 voters, the leader in the minority", n: 5, mutate: all(corrupt("c-3"), hashes("c-0=b", "c-1=a", "c-2=a", "c-3=a", "c-4=a")),
			want: want{kind: MoveLeader, member: "c-0", target: "c-1", reason: ReasonMovingLeader}},
		{name: "5 voters, two agree and three unanswered: no majority of all voters", n: 5,
			mutate: all(corrupt("c-4"), hashes("c-0=a", "c-1=a", "c-2=-", "c-3=-", "c-4=b")),
			want:   want{kind: Wait, reason: ReasonCorruptionNeedsHuman, message: "no strict majority of the 5 voters"}},
		{name: "5 voters, two against two against one", n: 5, mutate: all(corruptUnnamed, hashes("c-0=a", "c-1=a", "c-2=b", "c-3=b", "c-4=c")),
			want: want{kind: Wait, reason: ReasonCorruptionNeedsHuman}},
		{name: "removed and cleaned up, the others agree: disarm before the fresh member is added",
			mutate: all(corrupt("c-2"), replaced("c-2"), hashes("c-0=a", "c-1=a")),
			want:   want{kind: DisarmAlarm, reason: ReasonCorruptMemberReplaced}},
		{name: "alarm with member ID 0, the minority replaced, the others agree: disarm",
			mutate: all(corruptUnnamed, replaced("c-2"), hashes("c-0=a", "c-1=a")),
			want:   want{kind: DisarmAlarm, reason: ReasonCorruptMemberReplaced}},
		{name: "the named member gone but the others disagree: not disarmed",
			mutate: all(corrupt("c-2"), replaced("c-2"), hashes("c-0=a", "c-1=b")),
			want:   want{kind: Wait, reason: ReasonCorruptionNeedsHuman}},
		{name: "the named member gone but one of the others unanswered: not disarmed",
			mutate: all(corrupt("c-2"), replaced("c-2"), hashes("c-0=a", "c-1=-")),
			want:   want{kind: Wait, reason: ReasonCorruptionNeedsHuman}},
		{name: "NOSPACE recovery stays off while CORRUPT stands", mutate: all(corrupt("c-1", "c-2"), nospace("c-0"), hashes("c-0=a", "c-1=b", "c-2=c")),
			want: want{kind: Wait, reason: ReasonCorruptionNeedsHuman}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := planFor(t, tt.n, "", tt.mutate)
			checkAction(t, d, tt.want)
			if tt.want.kind == DisarmAlarm && d.Action.Alarm != health.AlarmCorrupt {
				t.Errorf("disarms %q, want CORRUPT", d.Action.Alarm)
			}
		})
	}
}

// No majority is a state only a human ends: Progressing is False and Degraded True, both saying why
// with every member's hash, so `kubectl describe` carries the evidence (and Degraded's Warning Event).
func TestCorruptionNeedsHumanStatus(t *testing.T) {
	d := planFor(t, 3, "", all(corruptUnnamed, hashes("c-0=a", "c-1=b", "c-2=c")))
	for _, w := range []condWant{
		{ConditionProgressing, "False", ReasonCorruptionNeedsHuman, "c-1 hash 0000000b"},
		{ConditionDegraded, "True", ReasonCorruptionNeedsHuman, "CORRUPT alarm raised on member 0"},
		{ConditionDegraded, "True", ReasonCorruptionNeedsHuman, "no strict majority of the 3 voters"},
		{ConditionAvailable, "True", ReasonQuorumHealthy, "an alarm is active"},
	} {
		c := d.Condition(w.typ)
		if string(c.Status) != string(w.status) || c.Reason != string(w.reason) || !strings.Contains(c.Message, w.message) {
			t.Errorf("%s = %s %s %q; want %s %s ~%q", w.typ, c.Status, c.Reason, c.Message, w.status, w.reason, w.message)
		}
	}
	// While Steward replaces the minority member, the alarm is Degraded's reason as before.
	d = planFor(t, 3, "", all(corrupt("c-2"), hashes("c-0=a", "c-1=a", "c-2=b")))
	if c := d.Condition(ConditionDegraded); c.Status != metav1.ConditionTrue || c.Reason != string(ReasonAlarm) {
		t.Errorf("Degraded while replacing = %s %s %q", c.Status, c.Reason, c.Message)
	}
}
