package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/resourceversion"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// freshness remembers, per cluster, the resourceVersion its last status write was based on, so
// the next reconcile does not decide from an informer cache that has not seen that write yet. A
// reconcile queued by another object's event (an EtcdMember, a Pod) can start a few milliseconds
// after the write, before the cluster's own watch event: it would read the status from before,
// and repeat a step the write recorded (issue 23's e2e saw StartRecovery applied twice, 10 s
// apart, from one trigger). Intent written first is only safe if it is also read back.
type freshness struct {
	written sync.Map // cluster UID -> written
}

type written struct {
	base, result string // resourceVersions: what the write was based on, what it produced
	at           time.Time
}

// freshWait bounds how long a reconcile waits for the cache to catch up with its own write: a
// watch that lags longer (an API server restart) must not stop the cluster's reconciles.
const freshWait = 5 * time.Second

// wrote records that a status write based on base produced result.
func (f *freshness) wrote(base, result *stewardv1.EtcdCluster, now time.Time) {
	f.written.Store(base.UID, written{base: base.ResourceVersion, result: result.ResourceVersion, at: now})
}

// stale says whether the cached object is older than the last write's result. The cache can sit
// at any version between the write's base and its result (another writer's change in between):
// each of those lacks what the write recorded. Versions are ordered with apimachinery's
// comparison (integers, as every etcd-backed API server serves them); where they cannot be
// ordered, only the write's base is known to be stale.
func (f *freshness) stale(cached *stewardv1.EtcdCluster, now time.Time) bool {
	v, ok := f.written.Load(cached.UID)
	if !ok {
		return false
	}
	w := v.(written)
	older := cached.ResourceVersion == w.base
	if c, err := resourceversion.CompareResourceVersion(cached.ResourceVersion, w.result); err == nil {
		older = c < 0
	}
	if !older || now.Sub(w.at) > freshWait {
		f.written.Delete(cached.UID)
		return false
	}
	return true
}
