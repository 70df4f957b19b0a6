//go:build failpoints

package failpoint

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// returns runs hit in a goroutine and says whether it came back within d. A goroutine that does
// not is left blocked: the points never release one, and the test process ends anyway.
func returns(d time.Duration, hit func()) bool {
	done := make(chan struct{})
	go func() {
		hit()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

func TestUnarmedPointReturns(t *testing.T) {
	if !Enabled {
		t.Fatal("Enabled is false with the failpoints tag")
	}
	for name, ctx := range map[string]context.Context{
		"no annotation":    context.Background(),
		"empty annotation": WithArmed(context.Background(), " "),
		"another point":    WithArmed(context.Background(), AfterMemberAdd),
		"unknown point":    WithArmed(context.Background(), "before-nothing"),
	} {
		t.Run(name, func(t *testing.T) {
			before := Hits(BeforeMemberAdd)
			if !returns(5*time.Second, func() { Hit(ctx, BeforeMemberAdd) }) {
				t.Fatal("a point that is not armed blocked")
			}
			if n := Hits(BeforeMemberAdd); n != before {
				t.Errorf("Hits went from %d to %d on a point that is not armed", before, n)
			}
		})
	}
}

// syncBuffer lets the test read what the blocked goroutine logged.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestArmedPointBlocksLogsAndCounts(t *testing.T) {
	var out syncBuffer
	ctx, cancel := context.WithCancel(log.IntoContext(context.Background(), zap.New(zap.WriteTo(&out))))
	ctx = WithArmed(ctx, "  "+AfterPodDelete+"\n") // as a YAML block scalar would leave it
	before := Hits(AfterPodDelete)

	done := make(chan struct{})
	go func() {
		Hit(ctx, AfterPodDelete)
		close(done)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for Hits(AfterPodDelete) == before {
		if time.Now().After(deadline) {
			t.Fatal("the armed point was never counted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := Hits(AfterPodDelete); n != before+1 {
		t.Errorf("Hits = %d, want %d", n, before+1)
	}
	logged := out.String()
	if !strings.Contains(logged, `"msg":"failpoint hit"`) || !strings.Contains(logged, `"failpoint":"after-pod-delete"`) {
		t.Errorf("log line missing, got %q", logged)
	}

	// The point must hold even when the reconcile's context ends, or the reconcile would go on.
	cancel()
	select {
	case <-done:
		t.Fatal("the armed point returned")
	case <-time.After(300 * time.Millisecond):
	}
}
