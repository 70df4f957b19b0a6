package framework

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// closingWatcher answers every Watch with a watch the server has already ended.
type closingWatcher struct {
	client.WithWatch
	opened atomic.Int32
}

func (c *closingWatcher) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	c.opened.Add(1)
	w := watch.NewFake()
	w.Stop()
	return w, nil
}

// A server that ends each watch at once is asked again once a second, not in a loop.
func TestWatchClusterPacesReopens(t *testing.T) {
	cw := &closingWatcher{}
	f := &Framework{Watcher: cw}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	f.WatchCluster(ctx, "ns", "db", nil)
	if n := cw.opened.Load(); n < 1 || n > 3 {
		t.Errorf("opened %d watches in 1.5 s, want 2 (one a second)", n)
	}
}
