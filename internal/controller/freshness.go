package controller

import (
	"sync"
	"time"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// freshness remembers, per cluster, the resourceVersion its last status write was based on, so
// the next reconcile does not decide from an informer cache that has not seen that write yet. A
// reconcile queued by another object's event (an EtcdMember, a Pod) can start a few milliseconds
// after the write, before the cluster's own watch event: it would read the status from before,
// and repeat a step the write recorded (issue 23's e2e saw StartRecovery applied twice, 10 s
// apart, from one trigger). Intent written first is only safe if it is also read back.
type freshness struct {
	written sync.Map // cluster UID -> writtenFrom
}

type writtenFrom struct {
	resourceVersion string
	at              time.Time
}

// freshWait bounds how long a reconcile waits for the cache to catch up with its own write: a
// watch that lags longer (an API server restart) must not stop the cluster's reconciles.
const freshWait = 5 * time.Second

// wrote records that a status write was based on the object at base's resourceVersion.
func (f *freshness) wrote(base *stewardv1.EtcdCluster, now time.Time) {
	f.written.Store(base.UID, writtenFrom{resourceVersion: base.ResourceVersion, at: now})
}

// stale says whether the cached object still is the one the last write was based on.
func (f *freshness) stale(cached *stewardv1.EtcdCluster, now time.Time) bool {
	v, ok := f.written.Load(cached.UID)
	if !ok {
		return false
	}
	w := v.(writtenFrom)
	if w.resourceVersion != cached.ResourceVersion || now.Sub(w.at) > freshWait {
		f.written.Delete(cached.UID)
		return false
	}
	return true
}
