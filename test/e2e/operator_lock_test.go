//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
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
					return webhookAnswers(ctx)
				}
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("no new operator Pod was Ready within 2 minutes of the kill")
}

// webhookAnswers waits for a TLS handshake through the webhook Service's address from the host,
// the API server's route (the host's kube-proxy): the old operator's process is gone, so an
// answer is the new one's.
func webhookAnswers(ctx context.Context) error {
	var svc corev1.Service
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: f.OperatorNamespace, Name: "steward-webhook-service"}, &svc); err != nil {
		return fmt.Errorf("the webhook's Service: %w", err)
	}
	addr := net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port)))
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: time.Second}, Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // reachability only
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(200 * time.Millisecond) {
		var c net.Conn
		if c, err = d.DialContext(ctx, "tcp", addr); err == nil {
			_ = c.Close()
			return nil
		}
	}
	return fmt.Errorf("the eviction webhook does not answer at %s from the host: %w", addr, err)
}
