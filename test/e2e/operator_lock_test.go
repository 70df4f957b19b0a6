//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-steward/steward/test/e2e/framework"
)

// operatorUp keeps scenarios that kill the operator apart from those that need it up throughout:
// a drain (while the operator restarts, its eviction webhook, failurePolicy Ignore, lets an
// eviction through without the leadership handoff; CI saw a drain of the leader's node without a
// MoveLeader because an adoption scenario was killing the operator). Drains hold it shared, a
// kill holds it alone until the new operator Pod is Ready, so neither waits long for the other.
var operatorUp sync.RWMutex

// holdOperator keeps other scenarios from killing the operator until the returned release is
// called (or the test ends).
func holdOperator(t *testing.T) (release func()) {
	t.Helper()
	operatorUp.RLock()
	release = sync.OnceFunc(operatorUp.RUnlock)
	t.Cleanup(release)
	return release
}

// killOperator deletes the operator's Pods at once and waits for its Deployment's new Pod to be
// Ready.
func killOperator(t *testing.T) {
	t.Helper()
	if err := killOperatorNow(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// killOperatorNow is killOperator for a goroutine other than the test's (no t.Fatal).
func killOperatorNow(ctx context.Context) error {
	operatorUp.Lock()
	defer operatorUp.Unlock()
	return killOperatorLocked(ctx)
}

// killOperatorLocked kills the operator; the caller holds operatorUp.
func killOperatorLocked(ctx context.Context) error {
	killed := time.Now()
	var pods corev1.PodList
	if err := f.Client.List(ctx, &pods, client.InNamespace(f.OperatorNamespace)); err != nil {
		return fmt.Errorf("listing the operator's Pods: %w", err)
	}
	for i := range pods.Items {
		if err := f.Client.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("killing the operator: %w", err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if err := f.Client.List(ctx, &pods, client.InNamespace(f.OperatorNamespace)); err == nil {
			for _, p := range pods.Items {
				if p.CreationTimestamp.After(killed.Add(-time.Second)) && framework.PodReady(&p) {
					return nil
				}
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("no new operator Pod was Ready within 2 minutes of the kill")
}
