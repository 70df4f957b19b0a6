package plan

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/health"
)

// runs makes a member run version (recorded, its Pod built for it, its etcd reporting it) on data
// last written by that version with the given storage version.
func (f *Facts) runs(name, version, storage string) {
	m := f.m(name)
	m.Template.Version = version
	t := *m.Template.DeepCopy()
	m.Pod.Template = &t
	f.ep(name).Version, f.ep(name).StorageVersion = version, storage
	m.DataVersion = &stewardv1.DataVersion{Server: version, Storage: storage}
}

// midRoll is a 3-member cluster rolling 3.5.32 → 3.6.16 at turn's turn (followers from the
// highest ordinal, the leader c-0 last, after handing leadership to c-1): the members before it
// run 3.6.16 (no storage version yet: the cluster version is still 3.5), turn's template already
// says 3.6.16 but its data was last written by 3.5.32, and the members after it still run 3.5.32.
func midRoll(t *testing.T, turn string) Facts {
	f := healthyFacts(t, 3, "")
	f.lead("c-1")
	f.retarget(func(t *stewardv1.MemberTemplate) { t.Version = "3.6.16" })
	done := true
	for _, n := range []string{"c-2", "c-1", "c-0"} {
		switch {
		case n == turn:
			f.runs(n, "3.5.32", "")
			f.m(n).Template.Version = "3.6.16"
			done = false
		case done:
			f.runs(n, "3.6.16", "")
		default:
			f.runs(n, "3.5.32", "")
		}
	}
	f.Cluster.Spec.Version = "3.7.3" // the second edit, at this very moment
	return f
}

// Issue 23, finding 8: a 3.5 → 3.6 → 3.7 edit made while a member is between its old Pod and its
// new one. Neither Pod nor endpoint says what the member runs then, and its recorded template
// already says 3.6; only its recorded data version says 3.5. 3.7.3 must not be adopted, at any
// member's turn, and the member is rebuilt on the current target.
func TestVersionEditBetweenPodsReadsDataVersion(t *testing.T) {
	for _, turn := range []string{"c-2", "c-1", "c-0"} {
		for _, between := range []struct {
			name string
			set  func(f *Facts, n string)
			want Kind
		}{
			{"old Pod gone", func(f *Facts, n string) { f.podGone(n) }, CreatePod},
			{"new Pod not started", func(f *Facts, n string) {
				t := *f.m(n).Template.DeepCopy()
				f.m(n).Pod = Pod{Exists: true, Phase: "Pending", Template: &t, NotReadySince: f.Now}
				f.silence(n)
			}, Wait},
		} {
			t.Run(turn+"/"+between.name, func(t *testing.T) {
				f := midRoll(t, turn)
				between.set(&f, turn)
				d := Plan(f)
				if d.Action.Kind == AdoptSpec || d.Target.Version != "3.6.16" {
					t.Fatalf("adopted 3.7.3 while %s's data is 3.5's: %s", turn, d.Action)
				}
				if !strings.Contains(d.AdoptionRefused, "3.7.3 is refused") || !strings.Contains(d.AdoptionRefused, "3.5") {
					t.Errorf("refusal %q does not say why", d.AdoptionRefused)
				}
				if d.Action.Kind != between.want || (between.want == CreatePod && d.Action.Member != turn) {
					t.Errorf("action %s, want %s %s", d.Action, between.want, turn)
				}
			})
		}
	}
}

// The refusal is told in the words of the data: the server version that wrote it, and for data
// with no storage version, that it is etcd 3.5's or older.
func TestVersionRefusalNamesTheData(t *testing.T) {
	f := midRoll(t, "c-0")
	f.podGone("c-0")
	d := Plan(f)
	for _, s := range []string{"c-0", "data last written by etcd 3.5.32", "SkippedMinor"} {
		if !strings.Contains(d.AdoptionRefused, s) {
			t.Errorf("refusal %q lacks %q", d.AdoptionRefused, s)
		}
	}
	if c := d.Condition("Progressing"); !strings.Contains(c.Message+d.AdoptionRefused, "3.7.3") {
		t.Errorf("Progressing %q says nothing of the refused edit", c.Message)
	}
}

// etcd 3.6 writes a storage version only once the cluster version is 3.6 (every member runs 3.6);
// until then the data is still 3.5's and 3.7 may not start on it. What etcd reports now counts
// over what was recorded.
func TestVersionEditWaitsForStorageVersion(t *testing.T) {
	f := healthyFacts(t, 3, "")
	f.retarget(func(t *stewardv1.MemberTemplate) { t.Version = "3.6.16" })
	for _, n := range []string{"c-0", "c-1", "c-2"} {
		f.runs(n, "3.6.16", "")
	}
	f.Cluster.Spec.Version = "3.7.3"
	d := Plan(f)
	if d.Action.Kind == AdoptSpec || !strings.Contains(d.AdoptionRefused, "no storage version") {
		t.Fatalf("adopted 3.7.3 on data with no storage version: %s (%q)", d.Action, d.AdoptionRefused)
	}
	for _, n := range []string{"c-0", "c-1", "c-2"} {
		f.ep(n).StorageVersion = "3.6.0" // the cluster version reached 3.6; the records lag behind
	}
	if d := Plan(f); d.Action.Kind != AdoptSpec {
		t.Fatalf("storage version 3.6 everywhere: 3.7.3 must be adopted, got %s (%q)", d.Action, d.AdoptionRefused)
	}
}

// A target adopted before this rule (by an older Steward) is never built on data it cannot start
// on: the Pod is not recreated, and status says why and what to do.
func TestNoPodBuiltOnDataTooOld(t *testing.T) {
	f := midRoll(t, "c-0")
	f.retarget(func(t *stewardv1.MemberTemplate) { t.Version = "3.7.3" })
	f.m("c-0").Template.Version = "3.7.3"
	f.podGone("c-0")
	d := Plan(f)
	if d.Action.Kind != Wait || d.Action.Reason != ReasonVersionStepRefused {
		t.Fatalf("action %s, want a Wait for %s", d.Action, ReasonVersionStepRefused)
	}
	for _, s := range []string{"c-0", "3.7.3", "3.5.32"} {
		if !strings.Contains(d.Action.Message, s) {
			t.Errorf("message %q lacks %q", d.Action.Message, s)
		}
	}
	// Nor rolled onto it: its running Pod is not deleted for a rebuild that would be refused.
	f = midRoll(t, "c-0")
	f.retarget(func(t *stewardv1.MemberTemplate) { t.Version = "3.7.3" })
	f.runs("c-0", "3.5.32", "")
	for _, n := range []string{"c-1", "c-2"} {
		f.runs(n, "3.7.3", "3.6.0")
	}
	if d := Plan(f); d.Action.Kind == DeletePod || d.Action.Kind == MoveLeader || d.Action.Kind == RestartContainer {
		t.Fatalf("rolling c-0 onto 3.7.3 over 3.5 data: %s", d.Action)
	}
}

// A Pod whose etcd the data check refused for its version keeps its data: it is not replaced as
// crash-looping (nor as lost data), and status says the version is the problem.
func TestVersionRefusedPodIsNotReplaced(t *testing.T) {
	f := midRoll(t, "c-0")
	f.retarget(func(t *stewardv1.MemberTemplate) { t.Version = "3.7.3" })
	f.Cluster.Spec.Version = "3.7.3"
	f.m("c-0").Template.Version = "3.7.3"
	f.m("c-0").Pod.Template.Version = "3.7.3"
	f.crashing("c-0", 5, "Error")
	f.m("c-0").Pod.VersionRefused = "VersionRefused: etcd 3.7.3 is two minors newer than the data (storage 3.5 or older)"
	d := Plan(f)
	if d.Action.Kind == RemoveMember || d.Action.Kind == MoveLeader || d.Action.Disruption != nil {
		t.Fatalf("a member refused for its version is disrupted: %s", d.Action)
	}
	if d.Action.Kind != Wait || !strings.Contains(d.Action.Message, "VersionRefused") {
		t.Errorf("action %s does not tell the refusal", d.Action)
	}
}

// The fix for such a member is a spec the data accepts: the edit back to 3.6 is adopted although
// the member's record and Pod say 3.7.3 (its etcd never ran 3.7.3), and the member is rolled.
func TestVersionRefusedPodTakesTheCorrectedSpec(t *testing.T) {
	f := midRoll(t, "c-0")
	f.retarget(func(t *stewardv1.MemberTemplate) { t.Version = "3.7.3" })
	f.m("c-0").Template.Version = "3.7.3"
	f.m("c-0").Pod.Template.Version = "3.7.3"
	f.crashing("c-0", 5, "Error")
	f.m("c-0").Pod.VersionRefused = "VersionRefused: too new for its data"
	f.Cluster.Spec.Version = "3.6.16"
	d := Plan(f)
	if d.Action.Kind != AdoptSpec {
		t.Fatalf("the corrected spec is not adopted: %s (%q)", d.Action, d.AdoptionRefused)
	}
	f.Cluster.Status.Observed.Version = "3.6.16"
	if d := Plan(f); d.Action.Kind != DeletePod || d.Action.Member != "c-0" {
		t.Fatalf("action %s, want c-0's refused Pod deleted for a rebuild on 3.6.16", d.Action)
	}
}

func TestDataVersionSteps(t *testing.T) {
	for _, tt := range []struct {
		server, storage, to string
		ok                  bool
	}{
		{"3.5.35", "", "3.6.16", true}, // one minor up from 3.5 data
		{"3.5.35", "", "3.5.40", true}, // a patch
		{"3.5.35", "", "3.7.3", false}, // two minors up
		{"3.6.16", "", "3.7.3", false}, // 3.6 ran on it, but the data is still 3.5's
		{"3.6.16", "3.6.0", "3.7.3", true},
		{"3.6.16", "3.6.0", "3.5.35", false}, // older than the data
		{"3.6.16", "3.6", "3.6.2", true},     // a storage version without its patch
		{"3.4.30", "", "3.5.35", true},
		{"3.4.30", "", "3.6.16", false},
		{"", "", "3.7.3", true},              // nothing known: nothing refused on this ground
		{"3.6.0-custom", "", "3.6.1", true},  // a custom server with no storage version
		{"3.7.1", "3.7.0", "my-build", true}, // an unparseable target: warned, unchecked
	} {
		d := &stewardv1.DataVersion{Server: tt.server, Storage: tt.storage}
		ok := true
		for _, r := range dataVersions(d) {
			ok = ok && ClassifyVersion(r.version, tt.to).Allowed()
		}
		if ok != tt.ok {
			t.Errorf("data %s/%q started by %s: allowed %v, want %v (%+v)", tt.server, tt.storage, tt.to, ok, tt.ok, dataVersions(d))
		}
	}
}

// Each member's data version for its EtcdMember: what its etcd reports while it answers, else the
// record, unchanged (so an idle cluster writes nothing).
func TestDecisionDataVersions(t *testing.T) {
	f := healthyFacts(t, 3, "")
	f.ep("c-0").Version, f.ep("c-0").StorageVersion = "3.6.16", "3.6.0"
	f.m("c-1").DataVersion = &stewardv1.DataVersion{Server: "3.5.32"}
	f.podGone("c-1")
	f.m("c-2").DataVersion = &stewardv1.DataVersion{Server: "3.5.32"}
	*f.ep("c-2") = health.Endpoint{Member: "c-2", Err: "connection refused", Version: ""}
	d := Plan(f)
	want := map[string]stewardv1.DataVersion{"c-0": {Server: "3.6.16", Storage: "3.6.0"},
		"c-1": {Server: "3.5.32"}, "c-2": {Server: "3.5.32"}}
	for n, w := range want {
		if got := d.DataVersions[n]; got == nil || *got != w {
			t.Errorf("%s: data version %+v, want %+v", n, got, w)
		}
	}
	f.m("c-1").DataVersion = nil
	if got := Plan(f).DataVersions["c-1"]; got != nil {
		t.Errorf("c-1 silent, nothing recorded: %+v", got)
	}
}

// e2e TestVersionEditedAtEachTurn found status "settled" (Progressing and RollingUpdate False,
// every member updated) while spec.version 3.7.3 waited for the storage version: every member ran
// the adopted 3.6.16, and the refused edit showed nowhere a waiter would look. A spec not yet
// adopted is not done: the plan waits (and comes back soon), and both conditions say why.
func TestRefusedEditIsNotSettled(t *testing.T) {
	f := healthyFacts(t, 3, "")
	f.retarget(func(t *stewardv1.MemberTemplate) { t.Version = "3.6.16" })
	for _, n := range []string{"c-0", "c-1", "c-2"} {
		f.runs(n, "3.6.16", "")
	}
	f.Cluster.Spec.Version = "3.7.3"
	d := Plan(f)
	if d.Action.Kind != Wait || d.Action.Reason != ReasonVersionStepRefused {
		t.Fatalf("action %s, want a Wait %s while 3.7.3 is not adopted", d.Action, ReasonVersionStepRefused)
	}
	for _, c := range []string{ConditionProgressing, ConditionRollingUpdate} {
		if got := d.Condition(c); got.Status != metav1.ConditionTrue || !strings.Contains(got.Message, "3.7.3") {
			t.Errorf("%s = %s %s %q, want True naming 3.7.3", c, got.Status, got.Reason, got.Message)
		}
	}
}
