package chaos

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

func testConfig(seed uint64) Config {
	return Config{Seed: seed, Replicas: 3,
		Operations:    []Operation{OpRoll, OpScale, OpRotateCA, OpDefragment, OpBackup, OpNone},
		Faults:        []Fault{FaultNone, FaultKillOperator, FaultFailpoint, FaultDeletePod, FaultKillEtcd, FaultPartitionMember},
		Failpoints:    []string{"a", "b", "c"},
		FailpointsFor: map[Operation][]string{OpScale: {"add"}}}
}

func steps(p *Planner, n int) []Step {
	var out []Step
	for range n {
		out = append(out, p.Next())
	}
	return out
}

func TestSeedReplaysTheSameDecisions(t *testing.T) {
	a, b := steps(NewPlanner(testConfig(7)), 50), steps(NewPlanner(testConfig(7)), 50)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed planned different steps")
	}
	if c := steps(NewPlanner(testConfig(8)), 50); reflect.DeepEqual(a, c) {
		t.Fatal("seeds 7 and 8 planned the same steps")
	}
}

func TestPlanStaysInBounds(t *testing.T) {
	seenOps, seenFaults := map[Operation]bool{}, map[Fault]bool{}
	for seed := range uint64(20) {
		replicas := int32(3)
		for _, s := range steps(NewPlanner(testConfig(seed)), 40) {
			seenOps[s.Op], seenFaults[s.Fault] = true, true
			if s.Op == OpScale {
				if s.Replicas == replicas || s.Replicas < 3 || s.Replicas > 4 {
					t.Fatalf("seed %d %s: scale from %d", seed, s, replicas)
				}
			} else if s.Replicas != replicas {
				t.Fatalf("seed %d %s: replicas changed from %d without a scale", seed, s, replicas)
			}
			replicas = s.Replicas
			if s.Member < 0 || s.Member >= s.Replicas {
				t.Fatalf("seed %d %s: member out of range", seed, s)
			}
			if s.FaultAfter < 0 || s.FaultAfter >= 20*time.Second || s.FaultFor < 3*time.Second || s.FaultFor >= 15*time.Second {
				t.Fatalf("seed %d %s: times out of range (for %s)", seed, s, s.FaultFor)
			}
			switch {
			case s.Fault == FaultFailpoint && s.Op == OpScale && s.Failpoint != "add":
				t.Fatalf("seed %d %s: a scale step must pick from its own points", seed, s)
			case s.Fault == FaultFailpoint && !slices.Contains([]string{"a", "b", "c", "add"}, s.Failpoint):
				t.Fatalf("seed %d %s: unknown failpoint", seed, s)
			case s.Fault != FaultFailpoint && s.Failpoint != "":
				t.Fatalf("seed %d %s: a failpoint without the fault", seed, s)
			case s.Op == OpRoll && s.Value == 0:
				t.Fatalf("seed %d %s: a roll without a value", seed, s)
			}
		}
	}
	if len(seenOps) != 6 || len(seenFaults) != 6 {
		t.Fatalf("20 seeds x 40 steps used %d operations and %d faults", len(seenOps), len(seenFaults))
	}
}

func TestFailpointFaultDroppedWithoutPoints(t *testing.T) {
	cfg := testConfig(3)
	cfg.Failpoints, cfg.FailpointsFor = nil, nil
	for _, s := range steps(NewPlanner(cfg), 200) {
		if s.Fault == FaultFailpoint {
			t.Fatalf("%s: no points were given", s)
		}
	}
}

func TestEmptyConfigIsQuiet(t *testing.T) {
	s := NewPlanner(Config{Seed: 1, Replicas: 3}).Next()
	if s.Op != OpNone || s.Fault != FaultNone || s.Replicas != 3 {
		t.Fatalf("%s, want nothing at all", s)
	}
}
