package framework

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// PollInterval is how often WaitFor re-checks a condition during its first 30 seconds: short,
// because rollouts are measured in seconds on the local cluster and tests should not add latency.
// A wait that lasts longer re-checks every 500 ms (pollInterval): most conditions read the API
// server and some etcd, and on CI's 2 cores, where the scenarios run CPU-bound, dozens of waits
// polling four times a second for minutes took CPU from the very thing they waited for. Not
// slower than that: a condition may be a state that lasts a second (a member being replaced).
const PollInterval = 250 * time.Millisecond

// pollInterval is the pause after an attempt made waited into a wait.
func pollInterval(waited time.Duration) time.Duration {
	if waited < 30*time.Second {
		return PollInterval
	}
	return 2 * PollInterval
}

// Condition reports whether what a test waits for holds. A non-nil error is kept as
// the "last error" for the failure message but does not stop the wait: transient API
// or etcd errors are expected while members restart.
type Condition func(ctx context.Context) (bool, error)

// WaitFor polls cond until it holds or timeout passes. On timeout it dumps the
// diagnostics of namespace ns (Pods, events, logs, the operator's logs) and fails the
// test with the last error seen. A wait that took more than half its timeout is logged as
// SLOW WAIT: the near misses that become flakes on a slower machine, found by grep.
func (f *Framework) WaitFor(t testing.TB, ns, desc string, timeout time.Duration, cond Condition) {
	t.Helper()
	start := time.Now()
	if err := Poll(context.Background(), timeout, cond); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		state := f.Brief(ctx, ns)
		warnings := f.Warnings(ctx, ns, 3)
		cancel()
		f.Dump(t, ns)
		t.Fatalf("waiting for %s: %v%s; now: %s", desc, err, warnings, state)
	}
	if took := time.Since(start); took > timeout/2 {
		t.Logf("SLOW WAIT: %s took %s of its %s", desc, took.Round(time.Millisecond), timeout)
	}
}

// Poll is WaitFor without a test: it returns an error naming the last failure.
func Poll(ctx context.Context, timeout time.Duration, cond Condition) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	var last error
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, 10*time.Second)
		ok, err := cond(attempt)
		cancelAttempt()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("not done after %s; last error: %w", time.Since(start).Round(time.Millisecond), last)
			}
			return fmt.Errorf("not done after %s", time.Since(start).Round(time.Millisecond))
		case <-time.After(pollInterval(time.Since(start))):
		}
	}
}
