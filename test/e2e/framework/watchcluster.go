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
// ends is opened again, from the current version: fn may see a version twice. One that fails or
// ends within a second of its opening is opened again only a second later, so a server that
// refuses or closes watches at once is not asked again in a loop.
func (f *Framework) WatchCluster(ctx context.Context, ns, name string, fn func(*stewardv1.EtcdCluster)) {
	for ctx.Err() == nil {
		opened := time.Now()
		w, err := f.Watcher.Watch(ctx, &stewardv1.EtcdClusterList{}, client.InNamespace(ns),
			client.MatchingFields{"metadata.name": name})
		if err == nil {
			for ev := range w.ResultChan() {
				if ec, ok := ev.Object.(*stewardv1.EtcdCluster); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
					fn(ec)
				}
			}
			w.Stop()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second - time.Since(opened)):
		}
	}
}
