//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/failpoint"
	"github.com/etcd-steward/steward/test/e2e/framework"
	"github.com/etcd-steward/steward/test/e2e/framework/chaos"
)

// ciSeeds run in CI; a seed that ever failed is added here and stays (a regression seed): 5 failed a
// soak on an accounting error (a member list that failed while a kill landed was read as quorum lost
// with no fault active).
var ciSeeds = []uint64{1, 3, 5}

// chaosPhaseEnv turns TestChaos on: hack/e2e.sh runs it in a phase of its own, after the other
// scenarios, because it kills the shared operator and restarts the API server (the others' metrics
// counters and timings would pay for it).
const chaosPhaseEnv = "STEWARD_E2E_CHAOS_PHASE"

// TestChaos is the fault campaign: per seed, a 3-member cluster under contended traffic is driven
// through operations chosen by the seed (rolls, scaling, CA rotations, defragmentations, backups)
// while faults chosen by the same seed strike at random moments (the operator killed, at random
// or stopped at a failpoint; a member's Pod deleted, its etcd killed, frozen or cut off the
// network; the operator cut off the members; the API server restarted). After each step it waits for convergence; throughout, it checks the invariants
// (package chaos) and writes a JSON and a Markdown report per seed to the artifacts directory.
//
// STEWARD_CHAOS_SEEDS (comma-separated; default the CI seeds) and STEWARD_CHAOS_DURATION (per
// seed; default 2m) set the run; `make chaos SEED=… DURATION=…` replays one.
func TestChaos(t *testing.T) {
	if os.Getenv(chaosPhaseEnv) != "1" {
		t.Skipf("runs only in hack/e2e.sh's chaos phase (%s=1): it kills the shared operator and restarts the API server", chaosPhaseEnv)
	}
	t.Parallel()
	seeds := ciSeeds
	if v := os.Getenv("STEWARD_CHAOS_SEEDS"); v != "" {
		seeds = nil
		for _, s := range strings.Split(v, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
			if err != nil {
				t.Fatalf("STEWARD_CHAOS_SEEDS=%q: %v", v, err)
			}
			seeds = append(seeds, n)
		}
	}
	duration := 2 * time.Minute
	if v := os.Getenv("STEWARD_CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("STEWARD_CHAOS_DURATION=%q: %v", v, err)
		}
		duration = d
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			t.Parallel()
			runCampaign(t, seed, duration)
		})
	}
}

func chaosConfig(seed uint64) chaos.Config {
	cfg := chaos.Config{Seed: seed, Replicas: 3,
		Operations: []chaos.Operation{chaos.OpRoll, chaos.OpScale, chaos.OpRotateCA, chaos.OpDefragment, chaos.OpNone},
		Faults: []chaos.Fault{chaos.FaultNone, chaos.FaultKillOperator, chaos.FaultPartitionOperator,
			chaos.FaultDeletePod, chaos.FaultKillEtcd, chaos.FaultPartitionMember, chaos.FaultStallDisk},
	}
	if _, err := framework.S3ConfigFromEnv(); err == nil {
		cfg.Operations = append(cfg.Operations, chaos.OpBackup)
	}
	if os.Getenv("STEWARD_CHAOS_APISERVER") != "0" {
		cfg.Faults = append(cfg.Faults, chaos.FaultRestartAPIServer)
	}
	// The local cluster's operator is built with the failpoints tag (hack/localkube/build.sh) unless
	// STEWARD_OPERATOR_TAGS says otherwise; then this fault is left out.
	if tags, set := os.LookupEnv("STEWARD_OPERATOR_TAGS"); !set || strings.Contains(tags, "failpoints") {
		cfg.Faults = append(cfg.Faults, chaos.FaultFailpoint)
		cfg.Failpoints = failpoint.Points
		disrupt := []string{failpoint.BeforePodDelete, failpoint.AfterPodDelete, failpoint.BeforeMoveLeader, failpoint.AfterMoveLeader}
		cfg.FailpointsFor = map[chaos.Operation][]string{
			chaos.OpRoll:     disrupt,
			chaos.OpRotateCA: disrupt,
			chaos.OpScale: {failpoint.BeforeMemberAdd, failpoint.AfterMemberAdd, failpoint.BeforeMemberPromote,
				failpoint.AfterMemberPromote, failpoint.BeforeMemberRemove, failpoint.AfterMemberRemove},
			chaos.OpDefragment: {failpoint.BeforeDefragment, failpoint.AfterDefragment, failpoint.BeforeMoveLeader, failpoint.AfterMoveLeader},
			// Repairs of the step's own member fault, if any, pass these; the rest of Points only in a soak.
			chaos.OpNone:   disrupt,
			chaos.OpBackup: disrupt,
		}
	}
	return cfg
}

// campaign is one seed's run.
type campaign struct {
	t        *testing.T
	ns, name string
	replicas atomic.Int32
	spec     sync.Mutex // held while the campaign changes the spec, and while status is judged

	mu         sync.Mutex
	windows    []chaos.Window
	violations []chaos.Violation
	// recoveryReported: InvNoRecovery was reported once (status keeps saying so while it runs).
	recoveryReported bool
}

func runCampaign(t *testing.T, seed uint64, duration time.Duration) {
	const name = "chaos"
	// Half the seeds (0, 1, 4, 5, 8, 9, ...: CI's 1 and 5 of 1, 3, 5) run with Automatic
	// quorum-loss recovery after a short delay: the faults never destroy a majority, so one that fires acted on a guess
	// (InvNoRecovery).
	automatic := func(ec *stewardv1.EtcdCluster) {
		if seed/2%2 == 0 {
			ec.Spec.QuorumLoss = &stewardv1.QuorumLossSpec{Policy: stewardv1.QuorumLossAutomatic, AfterSeconds: ptr.To[int32](30)}
		}
	}
	ns := settledCluster(t, name, 3, "", shortDropGrace, automatic)
	c := &campaign{t: t, ns: ns, name: name}
	c.replicas.Store(3)
	report := chaos.Report{Seed: seed, Cluster: ns + "/" + name, Started: time.Now()}
	traffic := framework.StartTraffic(clientFor(t, ns, name), framework.TrafficConfig{Prefix: "/chaos/", Contended: 0.3})
	mon := monitor(t, ns, name, func() []string { return memberNames(name, c.replicas.Load()) })
	stopHonesty := c.watchHonesty()

	planner := chaos.NewPlanner(chaosConfig(seed))
	for deadline := time.Now().Add(duration); time.Now().Before(deadline); {
		step := planner.Next()
		t.Logf("chaos seed %d: %s", seed, step)
		rec := c.runStep(step)
		t.Logf("chaos seed %d: step %d injected=%v converged in %.1fs %s %s", seed, step.N, rec.Injected, rec.Converged, rec.Note, rec.Error)
		report.Steps = append(report.Steps, rec)
		if rec.Error != "" {
			break
		}
	}
	stopHonesty()

	h := traffic.Stop()
	tl := mon.Stop()
	report.Duration = time.Since(report.Started).Seconds()
	report.Requests, report.Acknowledged, report.Failed = len(h), len(h.Acknowledged()), len(h.Failed())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if lost, err := traffic.VerifyNoLostWrites(ctx, clientFor(t, ns, name), h); err != nil {
		c.violate(chaos.InvNoLostWrites, "reading back the writes: "+err.Error())
	} else if report.Lost = len(lost); len(lost) > 0 {
		c.violate(chaos.InvNoLostWrites, fmt.Sprintf("%d acknowledged writes lost, first %+v", len(lost), lost[0]))
	}
	_, info := framework.CheckLinearizable(h, framework.LinearizabilityTimeout)
	report.Linearizable = info.String()
	if info.Result == porcupine.Illegal {
		path := filepath.Join(f.Artifacts, fmt.Sprintf("chaos-seed-%d-linearizability.html", seed))
		_ = info.Visualize(path, framework.LinearizabilityTimeout)
		c.violate(chaos.InvLinearizable, info.String()+"; visualization "+path)
	}
	report.Violations = append(append(report.Violations, c.violations...), chaos.Account(observations(tl), c.windows)...)
	report.Count()
	jsonPath, mdPath, err := report.Write(filepath.Join(f.Artifacts, "chaos"))
	if err != nil {
		t.Errorf("writing the report: %v", err)
	}
	t.Logf("MEASURE chaos seed %d: %d steps in %.0fs, operations %v, faults injected %v; %d requests, %d acknowledged writes, %d failed, %d lost; linearizability %s; %d violations (report %s)",
		seed, len(report.Steps), report.Duration, report.Operations, report.Faults, report.Requests, report.Acknowledged,
		report.Failed, report.Lost, report.Linearizable, len(report.Violations), jsonPath)
	for _, v := range report.Violations {
		t.Errorf("seed %d: %s at %s: %s", seed, v.Invariant, v.At.Format("15:04:05.000"), v.Detail)
	}
	if t.Failed() {
		md, _ := os.ReadFile(mdPath)
		t.Logf("report:\n%s\ntimeline of changes:\n%s", md, tl.Changes())
	}
}

func (c *campaign) violate(inv, detail string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.violations = append(c.violations, chaos.Violation{At: time.Now(), Invariant: inv, Detail: detail})
}

// observations turns the monitor's samples into the accounting's input. A failed member list
// with some Pod Ready means quorum is gone (the monitor's read is linearizable).
func observations(tl framework.Timeline) []chaos.Observation {
	out := make([]chaos.Observation, 0, len(tl))
	for _, s := range tl {
		o := chaos.Observation{At: s.At, End: s.Done, Unknown: s.Unknown, QuorumLost: s.ListErr != "" && !s.Unknown}
		for _, m := range s.Members {
			if len(m.Reasons) > 0 {
				o.Unavailable = append(o.Unavailable, m.Name)
			}
		}
		out = append(out, o)
	}
	return out
}

// watchHonesty polls status: whenever it says the cluster is done, every member Pod must run the
// spec's etcd options (the Roll operation changes --snapshot-count). Returns the stop function.
func (c *campaign) watchHonesty() func() {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			c.spec.Lock()
			c.checkHonest()
			c.spec.Unlock()
		}
	}()
	return func() { close(stop); <-done }
}

func (c *campaign) checkHonest() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ec, err := get(ctx, c.ns, c.name)
	if err != nil {
		return
	}
	if qr := ec.Status.QuorumRecovery; qr != nil && qr.InProgress != nil && !c.recoveryReported {
		c.recoveryReported = true
		c.violate(chaos.InvNoRecovery, fmt.Sprintf("a quorum recovery started (%s, survivor %q): %s",
			qr.InProgress.Trigger, qr.InProgress.Survivor, qr.InProgress.Evidence))
	}
	if ec.Spec.Options.SnapshotCount == nil {
		return
	}
	if ok, _ := settled(c.ns, c.name, c.replicas.Load())(ctx); !ok {
		return
	}
	want := fmt.Sprintf("--snapshot-count=%d", *ec.Spec.Options.SnapshotCount)
	pods, err := f.Pods(ctx, c.ns, map[string]string{stewardv1.LabelCluster: c.name})
	if err != nil {
		return
	}
	for _, name := range podsWithout(pods, want) {
		c.violate(chaos.InvHonestStatus, fmt.Sprintf("status settled (generation %d) while %s runs without %s", ec.Generation, name, want))
	}
}
