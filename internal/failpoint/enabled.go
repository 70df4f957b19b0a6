//go:build failpoints

package failpoint

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Enabled says whether this binary was built with the points.
const Enabled = true

type armedKey struct{}

// WithArmed arms the point spec names (the annotation's value) for everything done with the
// returned context. The context, not a global, carries it so that only the annotated cluster's
// reconcile stops; the other clusters the operator manages go on. A name that is no point arms
// nothing.
func WithArmed(ctx context.Context, spec string) context.Context {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return ctx
	}
	return context.WithValue(ctx, armedKey{}, spec)
}

// Hit stops the calling goroutine for good when ctx arms name. It does not return when ctx is
// cancelled either: a point that let the reconcile go on would let it write what the crash is
// meant to lose. Nor does it exit the process: the kubelet would count that as a crash and back
// off restarting it. The campaign sees the log line (or the counter) and kills the Pod itself.
func Hit(ctx context.Context, name string) {
	if armed, _ := ctx.Value(armedKey{}).(string); armed != name {
		return
	}
	log.FromContext(ctx).Info("failpoint hit", "failpoint", name)
	counter(name).Add(1)
	select {}
}

var hits sync.Map // point name -> *atomic.Uint64

func counter(name string) *atomic.Uint64 {
	c, _ := hits.LoadOrStore(name, new(atomic.Uint64))
	return c.(*atomic.Uint64)
}

// Hits is how many goroutines the point has stopped in this process: the log line goes to the
// operator's output, this is how a test in the same process knows a goroutine got there.
func Hits(name string) uint64 { return counter(name).Load() }
