package chaos

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	r := Report{Seed: 42, Cluster: "ns/c", Started: t0, Duration: 300, Requests: 900, Acknowledged: 400, Linearizable: "Ok",
		Steps: []StepRecord{
			{Step: Step{N: 1, Op: OpRoll, Replicas: 3, Fault: FaultDeletePod, Member: 2}, Injected: true, Converged: 31.5},
			{Step: Step{N: 2, Op: OpScale, Replicas: 4, Fault: FaultFailpoint, Failpoint: "after-member-add"}, Note: "not reached"},
			{Step: Step{N: 3, Op: OpRoll, Replicas: 4, Fault: FaultNone}, Error: "a | b"},
		}}
	r.Count()
	if r.Operations["Roll"] != 2 || r.Operations["Scale"] != 1 || len(r.Faults) != 1 || r.Faults["DeletePod"] != 1 {
		t.Fatalf("counted %v and %v: a fault not injected, or None, must not count", r.Operations, r.Faults)
	}
	md := r.Markdown()
	for _, want := range []string{"seed 42", "make chaos SEED=42", "Roll 2, Scale 1", "DeletePod 1", "Invariant violations: 0.",
		"| 1 | Roll → 3 | DeletePod member 2 after 0.0s | true | 31.5 |", "Failpoint after-member-add", "ERROR: a / b"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	r.Violations = []Violation{{At: t0, Invariant: InvQuorum, Detail: "x"}}
	if md := r.Markdown(); !strings.Contains(md, "Invariant violations: 1.") || !strings.Contains(md, InvQuorum+": x") {
		t.Errorf("markdown hides the violation:\n%s", md)
	}
	dir := t.TempDir()
	j, m, err := r.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	data, _ := os.ReadFile(j)
	if err := json.Unmarshal(data, &back); err != nil || back.Seed != 42 || len(back.Steps) != 3 || back.Steps[1].Failpoint != "after-member-add" {
		t.Fatalf("JSON %s: %v %+v", j, err, back)
	}
	if _, err := os.Stat(m); err != nil {
		t.Fatal(err)
	}
}
