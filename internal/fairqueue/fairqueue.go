// Package fairqueue holds the options every Steward controller is built with: a first-in,
// first-out queue, so that no object waits behind the others for good.
package fairqueue

import (
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
)

// Options are the options of a Steward controller with this many workers. Its queue is first
// in, first out: controller-runtime's default priority queue puts the objects of its informer's
// initial list (every object that existed when the operator started, or that was created while
// its caches filled) at low priority and keeps each requeue at its object's priority, so while
// the workers are never idle (one operator for many clusters on a busy machine: every cluster's
// periodic requeue and its Pods' events at normal priority) a low one waits for good. At 200
// clusters on the suite's machine 19 clusters had no status after 16 minutes, none of their
// reconciles run, the others reconciled every few seconds (`make bench-scale` with
// BENCH_CLUSTERS=200; workqueue_depth at priority -100: 19). In a first-in, first-out queue each
// cluster waits at most one turn of the others.
func Options(workers int) controller.Options {
	return controller.Options{MaxConcurrentReconciles: max(workers, 1), UsePriorityQueue: ptr.To(false)}
}
