package framework

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestLabel marks every namespace the e2e tests create, so leftovers of an aborted
// run can be found (kubectl get ns -l steward.dev/e2e).
const TestLabel = "steward.dev/e2e"

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a fresh namespace for t and registers its cleanup: on failure the
// namespace's diagnostics are dumped first; then the namespace is deleted (without
// waiting: Pods' graceful termination would only slow the suite down).
// STEWARD_E2E_KEEP_NAMESPACES=1 keeps failed tests' namespaces for inspection.
func (f *Framework) Namespace(t *testing.T) string {
	t.Helper()
	name := namespaceName(t.Name())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name,
		// Every Pod Steward makes (members, backup Jobs, restore init containers) must pass the
		// strictest Pod Security level; the namespace refuses any that does not.
		Labels: map[string]string{TestLabel: "true",
			"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.Client.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	// The ServiceAccount controller creates `default` asynchronously; Pods are refused
	// until it exists.
	f.WaitFor(t, name, "ServiceAccount default", 30*time.Second, func(ctx context.Context) (bool, error) {
		err := f.Client.Get(ctx, client.ObjectKey{Namespace: name, Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, client.IgnoreNotFound(err)
	})
	t.Cleanup(func() {
		if t.Failed() {
			f.Dump(t, name)
			if keepNamespaces() {
				t.Logf("keeping namespace %s (STEWARD_E2E_KEEP_NAMESPACES=1)", name)
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := f.Client.Delete(ctx, ns, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
	})
	return name
}

func keepNamespaces() bool { return envOr("STEWARD_E2E_KEEP_NAMESPACES", "") == "1" }

// namespaceName is e2e-<test name>-<random>, cut to the 63 characters of a DNS label.
func namespaceName(test string) string {
	s := nonDNS.ReplaceAllString(strings.ToLower(test), "-")
	s = strings.Trim(s, "-")
	if len(s) > 45 {
		s = strings.TrimRight(s[:45], "-")
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return "e2e-" + s + "-" + hex.EncodeToString(b)
}
