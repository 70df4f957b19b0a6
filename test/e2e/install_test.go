//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// installPhaseEnv turns TestInstall on. hack/e2e.sh sets it in a phase of its own, after the other
// scenarios: TestInstall stops the operator installed from config/default for its duration (two
// operators must never act on the same EtcdCluster), so it cannot run alongside them.
const installPhaseEnv = "STEWARD_E2E_INSTALL_PHASE"

// operatorSelector matches the operator's Pods, whichever way it was installed.
var operatorSelector = client.MatchingLabels{"app.kubernetes.io/name": "steward", "app.kubernetes.io/component": "controller-manager"}

// TestInstall installs Steward with its Helm chart in namespaced mode in place of the kustomize
// install: a cluster in the watched namespace forms and rolls, one in a namespace it does not
// watch is left alone, and `helm upgrade` leaves the cluster healthy.
func TestInstall(t *testing.T) {
	if os.Getenv(installPhaseEnv) != "1" {
		t.Skipf("runs only in hack/e2e.sh's install phase (%s=1): it stops the suite's operator", installPhaseEnv)
	}
	start := time.Now()
	image := stopKustomizeOperator(t) // its cleanup, registered first, runs last
	opNS, watchedNS, otherNS := f.Namespace(t), f.Namespace(t), f.Namespace(t)
	h := newHelm(t)
	release := "steward-e2e"
	colon := strings.LastIndex(image, ":")
	if colon < strings.LastIndex(image, "/") || strings.Contains(image, "@") {
		t.Fatalf("the operator image %q is not repository:tag", image)
	}
	repo, tag := image[:colon], image[colon+1:]
	values := []string{
		"--set", "watchNamespaces={" + watchedNS + "}",
		"--set", "image.repository=" + repo, "--set", "image.tag=" + tag,
		"--set", "etcdImageRepository=" + f.EtcdImageRepository,
	}
	// Runs before the namespaces go and the suite's operator comes back: two operators must never
	// act on the same cluster.
	t.Cleanup(func() {
		if out, err := h.exec("uninstall", release, "--namespace", opNS, "--wait", "--timeout", "1m"); err != nil &&
			!strings.Contains(out, "not found") {
			t.Errorf("helm uninstall: %v", err)
		}
		waitNoOperatorPods(t, opNS)
	})
	// Installed copying the member binary into member Pods (the way of clusters whose runtime
	// cannot mount image volumes); the upgrade below goes back to the default, which mounts it
	// here, and must not restart a member for that.
	h.run(t, append([]string{"install", release, h.chart, "--namespace", opNS, "--skip-crds", "--wait", "--timeout", "2m",
		"--set", "extraArgs={--member-binary-volume=copy}"}, values...)...)
	t.Logf("helm install: namespaced operator in %s watching %s (%s)", opNS, watchedNS, time.Since(start).Round(time.Second))

	// A cluster where the operator does not look: it must stay untouched to the end.
	create(t, newCluster(otherNS, "stray", 1, ""))

	create(t, newCluster(watchedNS, "web", 3, ""))
	waitSettled(t, watchedNS, "web", 3, 3*time.Minute)
	podsOn(t, watchedNS, "web", 3, "the member binary copied by an init container", copiesMemberBinary)
	t.Logf("3-member cluster settled (%s)", time.Since(start).Round(time.Second))

	// A roll that restarts every member (Pods deleted and recreated on their PVCs), then one that
	// resizes them in place (the pods/resize subresource): both through the namespaced Role.
	restarted := uids(t, watchedNS, "web")
	update(t, watchedNS, "web", func(ec *stewardv1.EtcdCluster) { ec.Spec.Options.SnapshotCount = ptr.To[int64](5000) })
	waitSettled(t, watchedNS, "web", 3, 3*time.Minute)
	podsOn(t, watchedNS, "web", 3, "restarted with --snapshot-count=5000", func(p *corev1.Pod) bool {
		return strings.Contains(strings.Join(p.Spec.Containers[0].Args, " "), "--snapshot-count=5000") &&
			!strings.HasPrefix(restarted[p.Name], string(p.UID)+"/")
	})
	t.Logf("options change rolled onto every member (%s)", time.Since(start).Round(time.Second))
	update(t, watchedNS, "web", cpuRequest("30m"))
	waitSettled(t, watchedNS, "web", 3, 2*time.Minute)
	podsOn(t, watchedNS, "web", 3, "on the new resources", hasCPURequest("30m"))
	t.Logf("resources change applied to every member (%s)", time.Since(start).Round(time.Second))

	checkOperatorNotForbidden(t, opNS)

	before := uids(t, watchedNS, "web")
	h.run(t, append([]string{"upgrade", release, h.chart, "--namespace", opNS, "--skip-crds", "--wait", "--timeout", "2m",
		"--set", "logLevel=debug"}, values...)...) // and without --member-binary-volume=copy
	f.WaitFor(t, opNS, "the upgraded operator to run with --zap-log-level=debug", time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := operatorPods(ctx, opNS)
		if err != nil {
			return false, err
		}
		if len(pods) != 1 {
			return false, fmt.Errorf("%d operator Pods", len(pods))
		}
		args := strings.Join(pods[0].Spec.Containers[0].Args, " ")
		return strings.Contains(args, "--zap-log-level=debug") && pods[0].DeletionTimestamp == nil, nil
	})
	waitSettled(t, watchedNS, "web", 3, time.Minute)
	assertPodsUntouched(t, watchedNS, "web", before, "an operator upgrade must not restart members")
	t.Logf("helm upgrade: cluster healthy, no member restarted (%s)", time.Since(start).Round(time.Second))

	stray, err := get(context.Background(), otherNS, "stray")
	if err != nil {
		t.Fatal(err)
	}
	if stray.Status.ObservedGeneration != 0 || len(stray.Status.Conditions) > 0 || len(stray.Status.Members) > 0 {
		t.Errorf("the cluster in unwatched namespace %s has a status: %+v", otherNS, stray.Status)
	}
	if pods := memberPods(t, otherNS, "stray"); len(pods) > 0 {
		t.Errorf("the operator created Pods in unwatched namespace %s", otherNS)
	}
	checkOperatorNotForbidden(t, opNS)
	t.Logf("install phase scenario done in %s", time.Since(start).Round(time.Second))
}

// stopKustomizeOperator scales the suite's operator (installed from config/default) to zero and
// waits for its Pods to be gone; its cleanup scales it back and waits for it to be Available.
// It returns the operator's image, which the local cluster has.
func stopKustomizeOperator(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKey{Namespace: f.OperatorNamespace, Name: f.OperatorDeployment}
	var d appsv1.Deployment
	if err := f.Client.Get(ctx, key, &d); err != nil {
		t.Fatal(err)
	}
	image := ""
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "manager" {
			image = c.Image
		}
	}
	replicas := ptr.Deref(d.Spec.Replicas, 1)
	t.Cleanup(func() {
		if err := f.MergePatch(context.Background(), &d, fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)); err != nil {
			t.Errorf("scaling %s back to %d: %v", key, replicas, err)
			return
		}
		f.WaitFor(t, f.OperatorNamespace, "the suite's operator to be back", 2*time.Minute, func(ctx context.Context) (bool, error) {
			var d appsv1.Deployment
			if err := f.Client.Get(ctx, key, &d); err != nil {
				return false, err
			}
			return d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas >= 1, nil
		})
	})
	if err := f.MergePatch(ctx, &d, `{"spec":{"replicas":0}}`); err != nil {
		t.Fatal(err)
	}
	waitNoOperatorPods(t, f.OperatorNamespace)
	if image == "" {
		t.Fatalf("%s has no manager container", key)
	}
	return image
}

func operatorPods(ctx context.Context, ns string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	err := f.Client.List(ctx, &pods, client.InNamespace(ns), operatorSelector)
	return pods.Items, err
}

func waitNoOperatorPods(t *testing.T, ns string) {
	t.Helper()
	f.WaitFor(t, ns, "no operator Pod in "+ns, 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := operatorPods(ctx, ns)
		if err != nil {
			return false, err
		}
		return len(pods) == 0, fmt.Errorf("%d operator Pods left", len(pods))
	})
}

// checkOperatorNotForbidden fails on RBAC denials in the operator's log: a list or watch outside
// what the chart grants in namespaced mode (a cache not restricted to the watched namespaces).
func checkOperatorNotForbidden(t *testing.T, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pods, err := operatorPods(ctx, ns)
	if err != nil || len(pods) == 0 {
		t.Fatalf("no operator Pod in %s: %v", ns, err)
	}
	raw, err := f.Clientset.CoreV1().Pods(ns).GetLogs(pods[0].Name, &corev1.PodLogOptions{Container: "manager"}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var denied []string
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.Contains(l, "forbidden") {
			denied = append(denied, l)
		}
	}
	if len(denied) > 0 {
		t.Errorf("the namespaced operator was denied access %d time(s); first: %s", len(denied), denied[0])
	}
}

// helmCLI runs the helm hack/toolchain.sh builds (STEWARD_E2E_HELM) against the cluster under test.
type helmCLI struct {
	bin, chart string
	env        []string
}

func newHelm(t *testing.T) *helmCLI {
	t.Helper()
	bin := os.Getenv("STEWARD_E2E_HELM")
	if bin == "" {
		bin = filepath.Join("..", "..", "_out", "bin", "helm")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no helm (hack/toolchain.sh helm builds it; STEWARD_E2E_HELM names it): %v", err)
	}
	chart, err := filepath.Abs(filepath.Join("..", "..", "charts", "steward"))
	if err != nil {
		t.Fatal(err)
	}
	d := t.TempDir()
	return &helmCLI{bin: bin, chart: chart, env: []string{"KUBECONFIG=" + f.Kubeconfig,
		"HELM_CONFIG_HOME=" + filepath.Join(d, "config"), "HELM_CACHE_HOME=" + filepath.Join(d, "cache"),
		"HELM_DATA_HOME=" + filepath.Join(d, "data")}}
}

func (h *helmCLI) exec(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.bin, args...)
	cmd.Env = append(os.Environ(), h.env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

func (h *helmCLI) run(t *testing.T, args ...string) {
	t.Helper()
	if _, err := h.exec(args...); err != nil {
		t.Fatal(err)
	}
}

// copiesMemberBinary: the Pod's etcd runs the member binary an init container copied in, not one
// mounted from the Steward image.
func copiesMemberBinary(p *corev1.Pod) bool {
	return len(p.Spec.InitContainers) == 1 && p.Spec.InitContainers[0].Name == "steward-install" &&
		strings.HasPrefix(p.Spec.Containers[0].Command[0], "/steward-tools/")
}
