package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func at(rv string) *stewardv1.EtcdCluster {
	return &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{UID: "u1", ResourceVersion: rv}}
}

func TestFreshnessWaitsForTheCacheToSeeTheWrite(t *testing.T) {
	var f freshness
	now := time.Now()
	if f.stale(at("10"), now) {
		t.Fatal("stale before any write")
	}
	f.wrote(at("10"), at("11"), now)
	if !f.stale(at("10"), now.Add(time.Second)) {
		t.Error("the cache still holds the object the write was based on: want stale")
	}
	if f.stale(at("11"), now.Add(time.Second)) {
		t.Error("the cache has seen the write: want fresh")
	}
	if f.stale(at("10"), now.Add(2*time.Second)) {
		t.Error("once seen fresh, the record is gone")
	}
	f.wrote(at("12"), at("13"), now)
	if f.stale(at("12"), now.Add(freshWait+time.Millisecond)) {
		t.Error("a cache lagging past freshWait must not hold reconciles")
	}
}

// CI's clean-clone run recorded StartRecovery twice, 10 s apart. The sequence: a reconcile read
// the cluster at 10 (before the user's recover-quorum annotation) and wrote status; the annotation
// had meanwhile made 11; the next reconcile read 11 (annotated, status from before the first
// write), started the recovery and wrote 13 on top of the first write's 12; the one after read 12
// from the cache (the first write: annotated, no recovery in progress) and, since 12 is not 11,
// took the cache as fresh and started the recovery again. The cache is fresh only once it holds
// the version the write produced, or a later one.
func TestFreshnessStaleUntilTheWrittenVersionIsSeen(t *testing.T) {
	var f freshness
	now := time.Now()
	f.wrote(at("10"), at("12"), now)
	f.wrote(at("11"), at("13"), now)
	for _, rv := range []string{"11", "12"} {
		if !f.stale(at(rv), now.Add(time.Second)) {
			t.Errorf("cache at %s, the write made 13: want stale", rv)
		}
	}
	if f.stale(at("14"), now.Add(time.Second)) {
		t.Error("cache past the write: want fresh")
	}
}

// Versions that are not integers (an aggregated or non-etcd API server) cannot be ordered: the
// guard falls back to the one thing it can tell, the object the write was based on.
func TestFreshnessUnorderedVersions(t *testing.T) {
	var f freshness
	now := time.Now()
	f.wrote(at("a"), at("c"), now)
	if !f.stale(at("a"), now) {
		t.Error("cache at the write's base: want stale")
	}
	if f.stale(at("b"), now) {
		t.Error("cache moved on, versions unordered: want fresh")
	}
}
