package framework

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// WatchCluster calls fn with each version of one EtcdCluster the API server sends, the current one
// first, until ctx ends: a watch where a sampler used to GET the object every 200 ms (about 5
// requests a second per rolling scenario, each answered with the whole object). A watch the server
// ends is opened again, from the current version: fn may see a version twice.
func (f *Framework) WatchCluster(ctx context.Context, ns, name string, fn func(*stewardv1.EtcdCluster)) {
	for ctx.Err() == nil {
		w, err := f.Watcher.Watch(ctx, &stewardv1.EtcdClusterList{}, client.InNamespace(ns),
			client.MatchingFields{"metadata.name": name})
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		for ev := range w.ResultChan() {
			if ec, ok := ev.Object.(*stewardv1.EtcdCluster); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				fn(ec)
			}
		}
		w.Stop()
	}
}
