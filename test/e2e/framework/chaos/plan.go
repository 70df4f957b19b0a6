// Package chaos holds the pure parts of the fault campaign: the seeded choice of operations and
// faults (so a seed replays the same decisions), the accounting that tells the disruptions the
// campaign injected from the ones Steward made, and the report. The e2e test drives Kubernetes.
package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Operation is a change the campaign asks of Steward.
type Operation string

const (
	OpRoll       Operation = "Roll"       // an etcd option changes: every member restarts
	OpScale      Operation = "Scale"      // 3 -> 4 members, or back
	OpRotateCA   Operation = "RotateCA"   // three passes, two of them restarts
	OpDefragment Operation = "Defragment" // on demand, one member at a time
	OpBackup     Operation = "Backup"     // a snapshot to S3
	OpNone       Operation = "None"       // faults alone; Steward repairs
)

// Fault is what the campaign does to the system while an operation runs.
type Fault string

const (
	FaultNone              Fault = "None"
	FaultKillOperator      Fault = "KillOperator"      // its Pod deleted with no grace: SIGKILL
	FaultFailpoint         Fault = "Failpoint"         // the operator stopped at a failpoint, then SIGKILLed
	FaultPartitionOperator Fault = "PartitionOperator" // it reaches the API server, not the members
	FaultDeletePod         Fault = "DeletePod"         // a member's Pod deleted
	FaultKillEtcd          Fault = "KillEtcd"          // a member's etcd process killed; the kubelet restarts it
	FaultPartitionMember   Fault = "PartitionMember"   // a member's network cut off, then healed
	FaultStallDisk         Fault = "StallDisk"         // a member's process frozen: a disk whose writes never return
	FaultRestartAPIServer  Fault = "RestartAPIServer"  // kube-apiserver stopped and started mid-step
)

// MemberFault: the fault makes one member unavailable (the others do not touch a member).
func (f Fault) MemberFault() bool {
	switch f {
	case FaultDeletePod, FaultKillEtcd, FaultPartitionMember, FaultStallDisk:
		return true
	}
	return false
}

// Step is one decision: an operation, and a fault injected FaultAfter it began and lifted
// FaultFor later (faults that heal by themselves, such as a kill, ignore FaultFor).
type Step struct {
	N          int           `json:"n"`
	Op         Operation     `json:"op"`
	Replicas   int32         `json:"replicas"`            // the spec's replicas once the operation is applied
	Fault      Fault         `json:"fault"`               //
	Member     int32         `json:"member"`              // the ordinal a member fault strikes
	Failpoint  string        `json:"failpoint,omitempty"` // for FaultFailpoint
	FaultAfter time.Duration `json:"faultAfter"`          //
	FaultFor   time.Duration `json:"faultFor"`            //
	Value      int64         `json:"value,omitempty"`     // the Roll's new snapshot-count
}

func (s Step) String() string {
	out := fmt.Sprintf("step %d: %s (replicas %d)", s.N, s.Op, s.Replicas)
	switch {
	case s.Fault == FaultNone:
		return out + ", no fault"
	case s.Fault == FaultFailpoint:
		return out + fmt.Sprintf(", %s %s after %s", s.Fault, s.Failpoint, s.FaultAfter)
	case s.Fault.MemberFault():
		return out + fmt.Sprintf(", %s member %d after %s for %s", s.Fault, s.Member, s.FaultAfter, s.FaultFor)
	}
	return out + fmt.Sprintf(", %s after %s for %s", s.Fault, s.FaultAfter, s.FaultFor)
}

// Config is what the campaign may choose from.
type Config struct {
	Seed       uint64
	Operations []Operation
	Faults     []Fault
	Failpoints []string // names FaultFailpoint picks from; none drops that fault
	// FailpointsFor narrows the choice to the points an operation passes through (a point the
	// operator never reaches injects nothing); an operation absent here picks from Failpoints.
	FailpointsFor map[Operation][]string
	Replicas      int32 // the cluster's size at the start
	// MaxFaultAfter bounds the delay before a fault (default 20s): operations take seconds to
	// tens of seconds, so faults land early, mid-way and after the end.
	MaxFaultAfter time.Duration
}

// Planner makes the steps of one seed. Its choices depend on the seed and on its own state
// (the replicas it planned), never on what the cluster did: a seed replays the same decisions.
type Planner struct {
	cfg      Config
	rng      *rand.Rand
	n        int
	replicas int32
}

func NewPlanner(cfg Config) *Planner {
	if cfg.MaxFaultAfter <= 0 {
		cfg.MaxFaultAfter = 20 * time.Second
	}
	if len(cfg.Failpoints) == 0 {
		cfg.Faults = slices.DeleteFunc(slices.Clone(cfg.Faults), func(f Fault) bool { return f == FaultFailpoint })
	}
	if len(cfg.Operations) == 0 {
		cfg.Operations = []Operation{OpNone}
	}
	if len(cfg.Faults) == 0 {
		cfg.Faults = []Fault{FaultNone}
	}
	return &Planner{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5bd1e995)), replicas: cfg.Replicas}
}

// Next is the next step.
func (p *Planner) Next() Step {
	p.n++
	s := Step{N: p.n, Op: p.cfg.Operations[p.rng.IntN(len(p.cfg.Operations))], Fault: p.cfg.Faults[p.rng.IntN(len(p.cfg.Faults))]}
	if s.Op == OpScale {
		if p.replicas > p.cfg.Replicas {
			p.replicas--
		} else {
			p.replicas++
		}
	}
	s.Replicas = p.replicas
	s.Member = p.rng.Int32N(p.replicas)
	s.FaultAfter = time.Duration(p.rng.Int64N(int64(p.cfg.MaxFaultAfter/time.Millisecond))) * time.Millisecond
	s.FaultFor = time.Duration(3000+p.rng.Int64N(12000)) * time.Millisecond
	if s.Fault == FaultFailpoint {
		points := p.cfg.FailpointsFor[s.Op]
		if len(points) == 0 {
			points = p.cfg.Failpoints
		}
		s.Failpoint = points[p.rng.IntN(len(points))]
	}
	if s.Op == OpRoll {
		s.Value = 10000 + int64(p.n)
	}
	return s
}
