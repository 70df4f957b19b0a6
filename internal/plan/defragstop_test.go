package plan

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
)

// defragStarted leaves a defragmentation record on the member, as an operator that died during the
// call does: started ago, never closed.
func defragStarted(name string, ago time.Duration) func(f *Facts) {
	return func(f *Facts) {
		f.m(name).Defrag = &stewardv1.MemberDefragmentation{StartedAt: ptr.To(metav1.NewTime(f.Now.Add(-ago)))}
	}
}

// closeDefrag is what the controller's RecordDefragmentation does to the record.
func closeDefrag(name string) func(f *Facts) {
	return func(f *Facts) {
		f.m(name).Defrag = &stewardv1.MemberDefragmentation{Last: &stewardv1.DefragmentationResult{
			Time: metav1.NewTime(f.Now), Outcome: stewardv1.DefragmentationInterrupted}}
	}
}

// A record whose etcd is no longer running cannot be a defragmentation still going on: the process
// that ran it is gone. It is closed as Interrupted, so the member's repair (and everything else)
// is no longer held by a member "still defragmenting" (issue 23, finding 7).
func TestPlanDefragRecordEndsWithItsEtcd(t *testing.T) {
	started := defragStarted("c-1", 10*time.Minute)
	runPlanCases(t, []planCase{
		{name: "crash-looping since", mutate: all(started, func(f *Facts) { f.crashing("c-1", 9, "Error") }),
			want: want{kind: RecordDefragmentation, member: "c-1", reason: ReasonDefragmentationInterrupted, message: "back-off"}},
		{name: "the data check refused its data", mutate: all(started, func(f *Facts) {
			f.m("c-1").Pod.Ready, f.m("c-1").Pod.DataLost = false, "Empty: /var/lib/etcd/data holds no etcd member"
			f.silence("c-1")
		}), want: want{kind: RecordDefragmentation, member: "c-1", reason: ReasonDefragmentationInterrupted, message: "data check"}},
		{name: "its container restarted after the record", mutate: all(started, func(f *Facts) {
			p := &f.m("c-1").Pod
			p.Ready, p.RestartCount, p.LastTerminatedAt = false, 1, f.Now.Add(-5*time.Minute)
			f.silence("c-1")
		}), want: want{kind: RecordDefragmentation, member: "c-1", reason: ReasonDefragmentationInterrupted, message: "restarted"}},
		{name: "its container is not running now", mutate: all(started, func(f *Facts) {
			f.m("c-1").Pod.Ready, f.m("c-1").Pod.Stopped = false, true
			f.silence("c-1")
		}), want: want{kind: RecordDefragmentation, member: "c-1", reason: ReasonDefragmentationInterrupted, message: "not running"}},
		{name: "its Pod Failed", mutate: all(started, func(f *Facts) {
			f.m("c-1").Pod.Failed, f.m("c-1").Pod.Ready = true, false
			f.silence("c-1")
		}), want: want{kind: RecordDefragmentation, member: "c-1", reason: ReasonDefragmentationInterrupted}},
		{name: "its Pod is gone", mutate: all(started, func(f *Facts) { f.podGone("c-1") }),
			want: want{kind: RecordDefragmentation, member: "c-1", reason: ReasonDefragmentationInterrupted, message: "Pod"}},
		{name: "a restart before the record says nothing: still defragmenting", mutate: all(started, func(f *Facts) {
			p := &f.m("c-1").Pod
			p.Ready, p.RestartCount, p.LastTerminatedAt = false, 3, f.Now.Add(-time.Hour)
			f.ep("c-1").ReadOK = false
		}), want: want{kind: Wait, reason: ReasonDefragmenting, message: "c-1 is defragmenting"}},
		// Once closed, nothing holds the repair.
		{name: "closed: the crash-looping member is replaced", mutate: all(closeDefrag("c-1"),
			func(f *Facts) { f.crashing("c-1", 9, "Error") }),
			want: want{kind: RemoveMember, member: "c-1", reason: ReasonMemberCrashLooping, disruption: disruption.Replace}},
		{name: "closed: the refused member is replaced", mutate: all(closeDefrag("c-1"), func(f *Facts) {
			f.m("c-1").Pod.Ready, f.m("c-1").Pod.DataLost = false, "Empty: /var/lib/etcd/data holds no etcd member"
			f.silence("c-1")
		}), want: want{kind: RemoveMember, member: "c-1", reason: ReasonMemberDataLost, disruption: disruption.Replace}},
		{name: "closed: a gone Pod is recreated", mutate: all(closeDefrag("c-1"), func(f *Facts) { f.podGone("c-1") }),
			want: want{kind: CreatePod, member: "c-1"}},
	})
}

// The chokepoint sees the same thing: a record on a member whose etcd stopped does not count it as
// a member disrupted by a defragmentation in flight; a record on a live member still does.
func TestDisruptionViewDefragRecord(t *testing.T) {
	f := healthyFacts(t, 3, "")
	defragStarted("c-1", 10*time.Minute)(&f)
	defragStarted("c-2", 10*time.Minute)(&f)
	f.ep("c-1").ReadOK = false
	f.crashing("c-2", 9, "Error")
	in := map[string]bool{}
	for _, m := range f.DisruptionView().Members {
		in[m.Name] = m.InFlight
	}
	if !in["c-1"] || in["c-2"] {
		t.Errorf("in flight: %v; want c-1 (defragmenting) and not c-2 (crash-looping since)", in)
	}
}

// Planned step by step, as the controller applies it: the record is closed, then the member repaired.
func TestPlanDefragRecordThenRepair(t *testing.T) {
	f := healthyFacts(t, 3, "")
	defragStarted("c-1", 10*time.Minute)(&f)
	f.crashing("c-1", 9, "Error")
	checkAction(t, Plan(f), want{kind: RecordDefragmentation, member: "c-1", reason: ReasonDefragmentationInterrupted})
	closeDefrag("c-1")(&f)
	checkAction(t, Plan(f), want{kind: RemoveMember, member: "c-1", reason: ReasonMemberCrashLooping, disruption: disruption.Replace})
}
