//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/plan"
	"github.com/etcd-steward/steward/internal/resources"
)

// previousImageEnv names the previous release's operator image (hack/localkube/previous-release.sh).
const previousImageEnv = "STEWARD_E2E_PREVIOUS_IMAGE"

// TestUpgradeFromPreviousRelease runs the previous release's operator (its Pods: root, no security
// context, no Pod revision), then this one: every member must move to this version's Pod through the
// normal roll (one at a time, never in place), shown as a StewardUpgrade pass, with its data and
// member ID; the new Pods are admitted by a namespace that now enforces "restricted", and the data a
// root-running etcd wrote is readable by the non-root one. It swaps the suite's operator image, so
// it runs in hack/e2e.sh's install phase.
func TestUpgradeFromPreviousRelease(t *testing.T) {
	if os.Getenv(installPhaseEnv) != "1" {
		t.Skipf("runs only in hack/e2e.sh's install phase (%s=1): it swaps the suite's operator", installPhaseEnv)
	}
	previous := os.Getenv(previousImageEnv)
	if previous == "" {
		t.Fatalf("%s is not set: hack/e2e.sh builds the previous release's image", previousImageEnv)
	}
	current := setOperatorImage(t, previous)
	t.Cleanup(func() { setOperatorImage(t, current) })

	ns := f.Namespace(t)
	// The previous release's Pods are not "restricted"; the namespace admits them until the upgrade.
	setPodSecurity(t, ns, "baseline")
	create(t, newCluster(ns, "db", 3, ""))
	waitSettled(t, ns, "db", 3, 4*time.Minute)
	for name, p := range memberPods(t, ns, "db") {
		if _, ok := p.Annotations[stewardv1.AnnotationPodRevision]; ok || p.Spec.SecurityContext.RunAsUser != nil {
			t.Fatalf("%s was not built by the previous release (revision %q, runAsUser set)", name,
				p.Annotations[stewardv1.AnnotationPodRevision])
		}
	}
	cl := clientFor(t, ns, "db")
	data := putData(t, cl, "/upgrade/", 50)
	ids := memberIDs(t, ns, "db")
	m := monitor(t, ns, "db", func() []string { return memberNames("db", 3) })

	setPodSecurity(t, ns, "restricted")
	start := time.Now()
	setOperatorImage(t, current)
	var order []string
	sawPass := false
	f.WaitFor(t, ns, "every member on this version's Pod", 6*time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, "db")
		if err != nil {
			return false, err
		}
		if r := ec.Status.Rollout; r != nil && r.Pass == plan.PassStewardUpgrade {
			sawPass = true
		}
		for name, p := range memberPods(t, ns, "db") {
			if p.DeletionTimestamp == nil && resources.PodRevisionOf(p) == resources.PodRevision && !slices.Contains(order, name) {
				order = append(order, name)
			}
		}
		ok, err := settled(ns, "db", 3)(ctx)
		return ok && len(order) == 3, err
	})
	measure(t, "upgrade roll of 3 members", time.Since(start))
	t.Logf("members moved in the order %s", strings.Join(order, ", "))
	assertMaxUnavailable(t, m, 1)
	checkData(t, cl, "/upgrade/", data)
	if after := memberIDs(t, ns, "db"); fmt.Sprint(after) != fmt.Sprint(ids) {
		t.Errorf("member IDs changed %v -> %v: PVC members restart, they are not replaced", ids, after)
	}
	if !sawPass {
		t.Errorf("status.rollout.pass never said %s", plan.PassStewardUpgrade)
	}
	for name, p := range memberPods(t, ns, "db") {
		if sc := p.Spec.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != resources.NonRootID {
			t.Errorf("%s does not run as %d after the upgrade", name, resources.NonRootID)
		}
	}
}

// setOperatorImage points the suite's operator Deployment at image, waits until its one Pod runs
// it and is ready, and returns the image it had.
func setOperatorImage(t *testing.T, image string) string {
	t.Helper()
	var old string
	changeOperator(t, "the operator to run "+image, func(c *corev1.Container) {
		old = c.Image
		c.Image, c.ImagePullPolicy = image, corev1.PullIfNotPresent
	}, func(c corev1.Container) bool { return c.Image == image })
	return old
}

// changeOperator changes the suite's operator container and waits until the Deployment's one Pod
// is ready and has a container that running says is the changed one.
func changeOperator(t *testing.T, what string, change func(*corev1.Container), running func(corev1.Container) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := client.ObjectKey{Namespace: f.OperatorNamespace, Name: f.OperatorDeployment}
	var d appsv1.Deployment
	if err := f.Client.Get(ctx, key, &d); err != nil {
		t.Fatal(err)
	}
	base := d.DeepCopy()
	change(&d.Spec.Template.Spec.Containers[0])
	if err := f.Client.Patch(ctx, &d, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	f.WaitFor(t, f.OperatorNamespace, what, 3*time.Minute, func(ctx context.Context) (bool, error) {
		if err := f.Client.Get(ctx, key, &d); err != nil {
			return false, err
		}
		s := d.Status
		if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != s.Replicas || s.AvailableReplicas != s.Replicas {
			return false, nil
		}
		var pods corev1.PodList
		if err := f.Client.List(ctx, &pods, client.InNamespace(f.OperatorNamespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || !running(p.Spec.Containers[0]) {
				return false, nil // an old Pod still terminating
			}
		}
		return len(pods.Items) == 1, nil
	})
}

func setPodSecurity(t *testing.T, ns, level string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var n corev1.Namespace
	if err := f.Client.Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil {
		t.Fatal(err)
	}
	base := n.DeepCopy()
	n.Labels["pod-security.kubernetes.io/enforce"] = level
	if err := f.Client.Patch(ctx, &n, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}
