package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func TestFreshnessWaitsForTheCacheToSeeTheWrite(t *testing.T) {
	var f freshness
	now := time.Now()
	at := func(rv string) *stewardv1.EtcdCluster {
		return &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{UID: "u1", ResourceVersion: rv}}
	}
	if f.stale(at("10"), now) {
		t.Fatal("stale before any write")
	}
	f.wrote(at("10"), now)
	if !f.stale(at("10"), now.Add(time.Second)) {
		t.Error("the cache still holds the object the write was based on: want stale")
	}
	if f.stale(at("11"), now.Add(time.Second)) {
		t.Error("the cache has moved past the write: want fresh")
	}
	if f.stale(at("10"), now.Add(2*time.Second)) {
		t.Error("once seen fresh, the record is gone")
	}
	f.wrote(at("12"), now)
	if f.stale(at("12"), now.Add(freshWait+time.Millisecond)) {
		t.Error("a cache lagging past freshWait must not hold reconciles")
	}
}
