//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/test/e2e/framework"
)

// stopAtFailpoint arms point on the cluster (the operator image is built with the failpoints tag),
// waits up to within for the operator to log that it stopped there, kills it (its Pod deleted with
// no grace) and disarms. then, when not nil, runs once the point is armed: the change that leads
// there. hit says whether the point was reached; one not reached injects nothing.
func stopAtFailpoint(ctx context.Context, ns, name, point string, within time.Duration, then func()) (hit bool, err error) {
	// An operator stopped at a point serves no drain either: held from before arming.
	operatorUp.Lock()
	defer operatorUp.Unlock()
	ec := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	arm := func(v string) error {
		val := "null"
		if v != "" {
			val = fmt.Sprintf("%q", v)
		}
		return f.MergePatch(context.Background(), ec, fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, stewardv1.AnnotationFailpoint, val))
	}
	if err := arm(point); err != nil {
		return false, err
	}
	armed := time.Now()
	// What leads to the point comes after the arming: done before, the operator could pass the
	// point first (CI: TestDowngrade's edit, then the wait for this lock while another scenario
	// held it, and etcd's downgrade was enabled before the point was armed).
	if then != nil {
		then()
	}
	_ = framework.Poll(ctx, within, func(ctx context.Context) (bool, error) {
		op, err := operatorPod(ctx)
		if err != nil {
			return false, err
		}
		since := fmt.Sprintf("--since=%ds", int(time.Since(armed).Seconds())+5)
		out, err := f.Kubectl(ctx, "logs", "-n", f.OperatorNamespace, op.Name, since)
		if err != nil {
			return false, err
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "failpoint hit") && strings.Contains(line, ns) && strings.Contains(line, point) {
				hit = true
			}
		}
		return hit, nil
	})
	if hit {
		err = killOperatorLocked(ctx)
	}
	if derr := arm(""); derr != nil && err == nil {
		err = fmt.Errorf("disarming: %w", derr)
	}
	return hit, err
}
