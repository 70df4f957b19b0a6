package plan

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/health"
)

var cnames = []string{"c-0", "c-1", "c-2"}

// on37 is a healthy 3-member cluster on 3.7.3 (storage 3.7, cluster version 3.7) asked for 3.6.16.
func on37(t *testing.T) Facts {
	f := healthyFacts(t, 3, "")
	f.allRun("3.7.3", "3.7.0", "3.7.0")
	f.Cluster.Spec.Version = "3.6.16"
	return f
}

// allRun: every member runs version on data of storage version storage; etcd speaks cluster.
func (f *Facts) allRun(version, storage, cluster string) {
	f.retarget(func(t *stewardv1.MemberTemplate) { t.Version = version })
	for _, n := range cnames {
		f.runs(n, version, storage)
	}
	f.Etcd.ClusterVersion = cluster
}

func (f *Facts) downgradeAt(stage stewardv1.DowngradeStage) {
	f.Cluster.Status.Downgrade = &stewardv1.DowngradeStatus{From: "3.7.3", Target: "3.6.16", Stage: stage,
		StartedAt: metav1.Now()}
}

// etcdDowngrade sets what every member reports of etcd's downgrade.
func (f *Facts) etcdDowngrade(enabled bool, storage string) {
	for _, n := range cnames {
		e := f.ep(n)
		e.DowngradeEnabled, e.DowngradeTarget = enabled, ""
		if enabled {
			e.DowngradeTarget = "3.6.0"
		}
		if storage != "" {
			e.StorageVersion = storage
			f.m(n).DataVersion.Storage = storage
		}
	}
}

func expectStage(t *testing.T, d Decision, stage stewardv1.DowngradeStage) {
	t.Helper()
	if d.Action.Kind != Downgrade || d.Action.DowngradeStage != stage {
		t.Fatalf("want Downgrade to %s, got %s (adoption refused: %q)", stage, d.Action, d.AdoptionRefused)
	}
}

// The whole downgrade, stage by stage: intent, enable, storage versions lowered, adoption, the
// roll (leader last), etcd ending it, completion. No member is touched before etcd lowered every
// storage version.
func TestDowngradeStages(t *testing.T) {
	f := on37(t)
	d := Plan(f)
	expectStage(t, d, stewardv1.DowngradeEnabling)
	if d.Action.DowngradeFrom != "3.7.3" || !strings.Contains(d.AdoptionRefused, "waits for etcd's downgrade protocol") {
		t.Fatalf("from %q, refusal %q", d.Action.DowngradeFrom, d.AdoptionRefused)
	}
	f.downgradeAt(stewardv1.DowngradeEnabling)
	expectStage(t, Plan(f), stewardv1.DowngradeEnabled)

	f.downgradeAt(stewardv1.DowngradeEnabled)
	f.etcdDowngrade(true, "")
	d = Plan(f)
	if d.Action.Kind != Wait || d.Action.Reason != ReasonDowngrading || !strings.Contains(d.Action.Message, `c-0 reports "3.7.0"`) {
		t.Fatalf("storage not lowered yet: want a Downgrading wait naming c-0, got %s", d.Action)
	}
	f.ep("c-1").StorageVersion = "3.6.0" // one lowered, the others not: still waits
	if d := Plan(f); d.Action.Kind != Wait || strings.Contains(d.Action.Message, "c-1") {
		t.Fatalf("want a wait for c-0 and c-2 only, got %s", d.Action)
	}
	f.etcdDowngrade(true, "3.6.0")
	f.Etcd.ClusterVersion = "3.6.0"
	if d := Plan(f); d.Action.Kind != AdoptSpec {
		t.Fatalf("every storage version lowered: want AdoptSpec, got %s (%q)", d.Action, d.AdoptionRefused)
	}
	f.Cluster.Status.Observed.Version = "3.6.16"
	for _, n := range cnames {
		f.m(n).Template.Version = "3.7.3"
		f.m(n).Pod.Template.Version = "3.7.3"
	}
	rolled := map[string]bool{}
	for i := 0; i < 8 && len(rolled) < 3; i++ {
		d := Plan(f)
		switch d.Action.Kind {
		case MoveLeader:
			if len(rolled) != 2 {
				t.Fatalf("leadership moved with %d members rolled: the leader goes last", len(rolled))
			}
			f.Etcd.Members, f.Etcd.Endpoints = moveLeaderTo(f, d.Action.TargetID)
		case DeletePod, RestartContainer:
			f.runs(d.Action.Member, "3.6.16", "3.6.0")
			f.ep(d.Action.Member).DowngradeEnabled, f.ep(d.Action.Member).DowngradeTarget = true, "3.6.0"
			rolled[d.Action.Member] = true
		default:
			t.Fatalf("step %d: unexpected %s", i, d.Action)
		}
	}
	if len(rolled) != 3 {
		t.Fatalf("rolled %v", rolled)
	}
	if d := Plan(f); d.Action.Kind == Downgrade || d.Action.Kind == Nothing {
		t.Fatalf("etcd still reports the downgrade enabled: not finished, got %s", d.Action)
	}
	f.etcdDowngrade(false, "")
	expectStage(t, Plan(f), stewardv1.DowngradeCompleted)
	f.downgradeAt(stewardv1.DowngradeCompleted)
	if d := Plan(f); d.Action.Kind != Nothing {
		t.Fatalf("after completion: %s", d.Action)
	}
}

// moveLeaderTo makes id the leader in every endpoint's view.
func moveLeaderTo(f Facts, id uint64) ([]health.Member, []health.Endpoint) {
	for i := range f.Etcd.Endpoints {
		f.Etcd.Endpoints[i].LeaderID = id
	}
	return f.Etcd.Members, f.Etcd.Endpoints
}

// spec.version back up mid-roll: etcd's downgrade is cancelled before anything rolls forward, then
// the members already on 3.6 roll back onto 3.7, then the record says Cancelled.
func TestDowngradeCancelledMidRoll(t *testing.T) {
	f := on37(t)
	f.downgradeAt(stewardv1.DowngradeEnabled)
	f.etcdDowngrade(true, "3.6.0")
	f.Etcd.ClusterVersion = "3.6.0"
	f.Cluster.Status.Observed.Version = "3.6.16"
	f.runs("c-2", "3.6.16", "3.6.0")
	f.ep("c-2").DowngradeEnabled, f.ep("c-2").DowngradeTarget = true, "3.6.0"
	f.Cluster.Spec.Version = "3.7.3" // the user goes back
	d := Plan(f)
	expectStage(t, d, stewardv1.DowngradeCancelling)
	if !strings.Contains(d.AdoptionRefused, "cancelled first") {
		t.Errorf("adoption refusal %q", d.AdoptionRefused)
	}
	f.downgradeAt(stewardv1.DowngradeCancelling)
	expectStage(t, Plan(f), stewardv1.DowngradeCancelling) // etcd still reports it: cancel again
	f.etcdDowngrade(false, "")
	if d := Plan(f); d.Action.Kind != AdoptSpec {
		t.Fatalf("cancelled in etcd: want the spec adopted, got %s (%q)", d.Action, d.AdoptionRefused)
	}
	f.Cluster.Status.Observed.Version = "3.7.3"
	d = Plan(f)
	if (d.Action.Kind != DeletePod && d.Action.Kind != RestartContainer) || d.Action.Member != "c-2" {
		t.Fatalf("want c-2 rolled forward, got %s", d.Action)
	}
	f.runs("c-2", "3.7.3", "3.6.0")
	expectStage(t, Plan(f), stewardv1.DowngradeCancelled)
}

// Cancelled before etcd enabled anything: recorded, etcd asked to cancel (harmless), nothing rolls.
func TestDowngradeWithdrawnBeforeEnable(t *testing.T) {
	f := on37(t)
	f.downgradeAt(stewardv1.DowngradeEnabling)
	f.Cluster.Spec.Version = "3.7.3"
	expectStage(t, Plan(f), stewardv1.DowngradeCancelling)
	f.downgradeAt(stewardv1.DowngradeCancelling)
	expectStage(t, Plan(f), stewardv1.DowngradeCancelled)
}

// A downgrade starts only from a healthy cluster at a safe point.
func TestDowngradeWaitsForHealth(t *testing.T) {
	f := on37(t)
	f.ep("c-1").Reachable, f.ep("c-1").Healthy, f.ep("c-1").ReadOK = false, false, false
	if d := Plan(f); d.Action.Kind == Downgrade {
		t.Fatalf("downgrade started with c-1 down: %s", d.Action)
	}
}

func TestVersionGuards(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(f *Facts)
		want   string
	}{
		{"two minors down", func(f *Facts) { f.Cluster.Spec.Version = "3.5.35" },
			"etcd downgrades one minor version at a time: set spec.version to a 3.6 release first"},
		{"no downgrade from 3.5", func(f *Facts) {
			f.allRun("3.5.35", "", "3.5.0")
			f.Cluster.Spec.Version = "3.4.30"
		}, "back from 3.6 and 3.7 only"},
		{"a flag the older etcd does not know", func(f *Facts) {
			f.allRun("3.6.16", "3.6.0", "3.6.0")
			f.Cluster.Spec.Version = "3.5.35"
			f.Cluster.Spec.Options.ExtraArgs = map[string]string{"feature-gates": "StopGRPCServiceOnDefrag=true"}
		}, "spec.options.extraArgs has --feature-gates, which etcd 3.5.35 does not know"},
		{"a feature gate the older etcd does not know", func(f *Facts) {
			f.Cluster.Spec.Options.ExtraArgs = map[string]string{"feature-gates": "FastLeaseKeepAlive=true"}
		}, "feature gate FastLeaseKeepAlive"},
		{"a patch below etcd's minimum before 3.6", func(f *Facts) {
			f.allRun("3.5.30", "", "3.5.0")
			f.Cluster.Spec.Version = "3.6.16"
		}, "set spec.version to 3.5.32 (or a later 3.5) first, then 3.6.16"},
		{"the cluster version lags the members", func(f *Facts) {
			f.allRun("3.6.16", "3.6.0", "3.5.0")
			f.Cluster.Spec.Version = "3.7.3"
		}, "the cluster speaks cluster version 3.5.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := on37(t)
			tc.mutate(&f)
			d := Plan(f)
			if d.Action.Kind == AdoptSpec || d.Action.Kind == Downgrade || !strings.Contains(d.AdoptionRefused, tc.want) {
				t.Fatalf("got %s; refusal %q, want it to say %q", d.Action, d.AdoptionRefused, tc.want)
			}
		})
	}
}

// An upgrade that did not finish goes back by a plain roll: the cluster version is still the older
// minor and no storage version was raised, so etcd needs no downgrade.
func TestUnfinishedUpgradeGoesBackWithoutTheProtocol(t *testing.T) {
	f := healthyFacts(t, 3, "")
	f.retarget(func(t *stewardv1.MemberTemplate) { t.Version = "3.6.16" })
	f.runs("c-2", "3.6.16", "")
	for _, n := range []string{"c-0", "c-1"} {
		f.runs(n, "3.5.35", "")
		f.m(n).Template.Version = "3.6.16"
	}
	f.Etcd.ClusterVersion = "3.5.0"
	f.Cluster.Spec.Version = "3.5.35"
	if d := Plan(f); d.Action.Kind != AdoptSpec {
		t.Fatalf("want 3.5.35 adopted for a plain roll back, got %s (%q)", d.Action, d.AdoptionRefused)
	}
	f.Etcd.ClusterVersion = "" // not read: fail closed
	if d := Plan(f); d.Action.Kind == AdoptSpec {
		t.Fatalf("adopted a step down without the cluster version")
	}
}

// 3.6 → 3.5 goes through etcd's protocol like 3.7 → 3.6 (it was withheld while a test artifact
// looked like stale reads; docs/upgrade.md).
func TestDowngradeFrom36(t *testing.T) {
	f := on37(t)
	f.allRun("3.6.16", "3.6.0", "3.6.0")
	f.Cluster.Spec.Version = "3.5.35"
	d := Plan(f)
	if d.Action.Kind != Downgrade || d.Action.DowngradeStage != stewardv1.DowngradeEnabling || d.Action.DowngradeFrom != "3.6.16" {
		t.Fatalf("got %s (stage %s from %q), want the downgrade recorded", d.Action, d.Action.DowngradeStage, d.Action.DowngradeFrom)
	}
}

// CI (stop 43): cancelled while c-2's in-place restart onto 3.6.16 was not yet recorded on its
// member (its Pod and its etcd say 3.6.16, its record still 3.7.3). The roll must still take it
// forward, and the downgrade must not stay Cancelling with the cluster called Reconciled.
func TestDowngradeCancelledBeforeTheRestartWasRecorded(t *testing.T) {
	f := on37(t)
	f.Cluster.Spec.Version = "3.7.3" // the user went back; adopted once etcd cancelled
	f.downgradeAt(stewardv1.DowngradeCancelling)
	f.Etcd.ClusterVersion = "3.6.0"
	f.runs("c-2", "3.6.16", "3.6.0")
	f.m("c-2").Template.Version = "3.7.3" // the record the restart had not yet replaced
	f.m("c-2").Pod.RestartedFrom = "containerd://before"
	d := Plan(f)
	if (d.Action.Kind != DeletePod && d.Action.Kind != RestartContainer) || d.Action.Member != "c-2" {
		t.Fatalf("want c-2 rolled forward, got %s %s", d.Action, d.Action.Message)
	}
	if c := d.Condition(ConditionProgressing); c.Reason == string(ReasonReconciled) {
		t.Errorf("Progressing says %s with c-2 on 3.6.16", c.Reason)
	}
	f.runs("c-2", "3.7.3", "3.6.0")
	expectStage(t, Plan(f), stewardv1.DowngradeCancelled)
}
