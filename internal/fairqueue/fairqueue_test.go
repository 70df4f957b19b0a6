package fairqueue

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// waitedFor runs a controller built with opts whose one worker is never idle: busy objects that
// requeue themselves at once, as clusters do when reconciles cost more than their requeue period.
// The object "quiet" is queued as an informer queues its initial list (low priority, where the queue
// has priorities). It returns how long quiet waited for its reconcile, or 0 when it never ran
// within the deadline.
func waitedFor(t *testing.T, opts controller.Options, deadline time.Duration) time.Duration {
	t.Helper()
	quiet := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "quiet"}}
	start := time.Now()
	var ranAt atomic.Int64
	opts.Reconciler = reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
		if req == quiet {
			ranAt.CompareAndSwap(0, int64(time.Since(start)))
			return reconcile.Result{}, nil
		}
		time.Sleep(2 * time.Millisecond) // a reconcile's reads
		return reconcile.Result{RequeueAfter: time.Millisecond}, nil
	})
	opts.SkipNameValidation = ptr.To(true)
	c, err := controller.NewUnmanaged("fairness", opts)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Watch(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		for _, name := range []string{"busy-1", "busy-2", "busy-3"} {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}})
		}
		if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
			pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, quiet)
		} else {
			q.Add(quiet)
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	for time.Since(start) < deadline && ranAt.Load() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return time.Duration(ranAt.Load())
}

// An object queued at low priority is reconciled even though the worker never runs out of other
// work. controller-runtime's default queue (UsePriorityQueue true) fails this: quiet is not
// reconciled in 5 s.
func TestOptionsReconcileEveryObject(t *testing.T) {
	if w := waitedFor(t, Options(1), 5*time.Second); w == 0 {
		t.Fatalf("quiet was not reconciled in 5 s behind 3 busy objects")
	} else {
		t.Logf("quiet reconciled %s after the start", w.Round(time.Millisecond))
	}
}

func TestOptionsKeepWorkers(t *testing.T) {
	for in, want := range map[int]int{0: 1, -3: 1, 1: 1, 4: 4} {
		if got := Options(in).MaxConcurrentReconciles; got != want {
			t.Errorf("Options(%d) workers %d, want %d", in, got, want)
		}
	}
}
