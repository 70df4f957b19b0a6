package dist

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// helmOwnLabels are the labels the chart adds to every object and the kustomize bundle has not:
// Helm's bookkeeping. They are the only difference the equivalence tests ignore in an object.
var helmOwnLabels = []string{
	"helm.sh/chart",
	"app.kubernetes.io/managed-by",
	"app.kubernetes.io/instance",
	"app.kubernetes.io/version",
}

// kustomizeOnly are the objects of the kustomize bundle the chart does not render, and why.
var kustomizeOnly = map[string]string{
	"v1/Namespace//steward-system": "Helm does not own its release namespace: `helm install --create-namespace` or kubectl creates it (docs/install.md)",
}

// TestChartMatchesKustomize: the chart with its default values renders the objects of
// config/default; with every monitoring piece on, those of config/default plus the
// config/prometheus component.
func TestChartMatchesKustomize(t *testing.T) {
	for _, c := range []struct {
		name, kustomization string
		set                 []string
	}{
		{"defaults", "config/default", nil},
		{"monitoring", chartDir + "/testdata/kustomize-monitoring", []string{
			"monitoring.serviceMonitor.enabled=true", "monitoring.podMonitor.enabled=true",
			"monitoring.prometheusRule.enabled=true", "monitoring.metricsReaderBinding.enabled=true",
			"monitoring.dashboard.enabled=true",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			want := index(t, kustomize(t, c.kustomization), "kustomize "+c.kustomization)
			got := index(t, mustHelmTemplate(t, c.set), "the chart")
			for _, k := range sortedKeys(want) {
				if why, ok := kustomizeOnly[k]; ok {
					t.Logf("%s: only in the kustomize bundle (%s)", k, why)
					continue
				}
				g, ok := got[k]
				if !ok {
					t.Errorf("%s is in %s but the chart does not render it", k, c.kustomization)
					continue
				}
				if diffs := diff("", normalize(want[k]), normalize(g)); len(diffs) > 0 {
					t.Errorf("%s differs between %s (-) and the chart (+):\n  %s", k, c.kustomization, strings.Join(diffs, "\n  "))
				}
			}
			for _, k := range sortedKeys(got) {
				if _, ok := want[k]; !ok {
					t.Errorf("the chart renders %s, which %s has not", k, c.kustomization)
				}
			}
		})
	}
}

// key names an object: apiVersion/kind/namespace/name.
func key(u *unstructured.Unstructured) string {
	return u.GetAPIVersion() + "/" + u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

func index(t *testing.T, objs []*unstructured.Unstructured, what string) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for _, u := range objs {
		if _, dup := out[key(u)]; dup {
			t.Fatalf("%s renders %s twice", what, key(u))
		}
		out[key(u)] = u
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// normalize is the object without Helm's own labels, as plain JSON values.
func normalize(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	labels := c.GetLabels()
	for _, l := range helmOwnLabels {
		delete(labels, l)
	}
	if len(labels) == 0 {
		unstructured.RemoveNestedField(c.Object, "metadata", "labels")
	} else {
		c.SetLabels(labels)
	}
	// Both sides through JSON: YAML integers and strings decode alike.
	b, err := yaml.Marshal(c.Object)
	if err != nil {
		panic(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		panic(err)
	}
	return m
}

// diff lists the paths where a and b differ (at most 20).
func diff(path string, a, b any) []string {
	if reflect.DeepEqual(a, b) {
		return nil
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			break
		}
		var out []string
		keys := map[string]bool{}
		for k := range x {
			keys[k] = true
		}
		for k := range y {
			keys[k] = true
		}
		names := sortedKeys(keys)
		for _, k := range names {
			out = append(out, diff(path+"."+k, x[k], y[k])...)
		}
		return out[:min(len(out), 20)]
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			break
		}
		var out []string
		for i := range x {
			out = append(out, diff(fmt.Sprintf("%s[%d]", path, i), x[i], y[i])...)
		}
		return out[:min(len(out), 20)]
	}
	return []string{fmt.Sprintf("%s: - %s + %s", path, short(a), short(b))}
}

func short(v any) string {
	if v == nil {
		return "<absent>"
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := strings.TrimSpace(string(b))
	s = strings.ReplaceAll(s, "\n", "\\n")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// deploymentArgs are the operator container's arguments in a render.
func deploymentArgs(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			m, _ := c.(map[string]any)
			if m["name"] != "manager" {
				continue
			}
			args, _, _ := unstructured.NestedStringSlice(m, "args")
			return args
		}
	}
	t.Fatal("no Deployment with a manager container rendered")
	return nil
}

// TestChartValues: each operator setting becomes its flag; defaults add none of them.
func TestChartValues(t *testing.T) {
	base := []string{"--leader-elect", "--health-probe-bind-address=:8081", "--metrics-bind-address=:8443"}
	for _, c := range []struct {
		name string
		set  []string
		want []string // the arguments beyond base, or all of them when base is not a prefix
	}{
		{"defaults", nil, base},
		{"namespaced", []string{"watchNamespaces={team-a,team-b,team-a}"},
			append(slices.Clone(base), "--watch-namespaces=team-a,team-b", "--operator-image=ghcr.io/etcd-steward/steward:dev")},
		{"settings", []string{"leaderElection=false", "logLevel=debug", "etcdImageRepository=registry.example/etcd",
			"maxConcurrentReconciles=8", "metrics.secure=false", "metrics.port=9090", "extraArgs={--sync-period=5m}"},
			[]string{"--health-probe-bind-address=:8081", "--metrics-bind-address=:9090", "--metrics-secure=false",
				"--etcd-image-repository=registry.example/etcd", "--max-concurrent-reconciles=8", "--zap-log-level=debug",
				"--sync-period=5m"}},
		{"eviction bound", []string{"evictionWebhook.bound=3m"}, append(slices.Clone(base), "--eviction-bound=3m")},
		{"another release's webhook objects", []string{"fullnameOverride=etcd-op"}, append(slices.Clone(base),
			"--webhook-cert-secret=etcd-op-webhook-server-cert", "--webhook-service=etcd-op-webhook-service",
			"--webhook-configuration=etcd-op-eviction")},
		{"eviction webhook off", []string{"evictionWebhook.enabled=false"},
			[]string{"--leader-elect", "--health-probe-bind-address=:8081", "--metrics-bind-address=:8443", "--eviction-webhook=false"}},
		{"digest", []string{"image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "watchNamespaces={a}"},
			append(slices.Clone(base), "--watch-namespaces=a",
				"--operator-image=ghcr.io/etcd-steward/steward@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := deploymentArgs(t, mustHelmTemplate(t, c.set)); !slices.Equal(got, c.want) {
				t.Errorf("args %q, want %q", got, c.want)
			}
		})
	}
}

// TestChartRefusesBadValues: values.schema.json stops what the operator would refuse at start.
func TestChartRefusesBadValues(t *testing.T) {
	for _, set := range [][]string{
		{"watchNamespaces={Team_A}"},
		{"maxConcurrentReconciles=0"},
		{"etcdImageRepository=gcr.io/etcd-development/etcd:v3.6.16"},
		{"logLevel=verbose"},
		{"image.pullPolicy=Sometimes"},
		{"metrics.port=8081"},
		{"unknownSetting=1"},
	} {
		t.Run(strings.Join(set, ","), func(t *testing.T) {
			t.Parallel()
			if _, err := helmTemplate(t, set); err == nil || !strings.Contains(err.Error(), "schema") {
				t.Errorf("the chart rendered with %v (%v); want the values schema to refuse it", set, err)
			}
		})
	}
}

// TestChartLint: helm lint --strict, in both modes.
func TestChartLint(t *testing.T) {
	for _, set := range [][]string{nil, {"watchNamespaces={team-a,team-b}"}} {
		args := []string{"lint", "--strict", chartDir, "--namespace", releaseNamespace}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		if out, err := run(t, helmEnv(t), helm(t), args...); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	}
}

// TestChartPodMonitorFollowsWatchNamespaces: in namespaced mode the members' PodMonitor selects
// the watched namespaces only.
func TestChartPodMonitorFollowsWatchNamespaces(t *testing.T) {
	objs := mustHelmTemplate(t, []string{"monitoring.podMonitor.enabled=true", "watchNamespaces={team-a,team-b}"})
	for _, u := range objs {
		if u.GetKind() != "PodMonitor" {
			continue
		}
		sel, _, _ := unstructured.NestedMap(u.Object, "spec", "namespaceSelector")
		if want := map[string]any{"matchNames": []any{"team-a", "team-b"}}; !reflect.DeepEqual(sel, want) {
			t.Errorf("namespaceSelector %v, want %v", sel, want)
		}
		return
	}
	t.Fatal("no PodMonitor rendered")
}

// TestChartPackage: `helm package` builds the chart, without its test data.
func TestChartPackage(t *testing.T) {
	dir := t.TempDir()
	if out, err := run(t, helmEnv(t), helm(t), "package", chartDir, "--destination", dir); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	pkgs, err := filepath.Glob(filepath.Join(dir, "steward-*.tgz"))
	if err != nil || len(pkgs) != 1 {
		t.Fatalf("packages %v (%v), want one steward-<version>.tgz", pkgs, err)
	}
	out, err := run(t, nil, "tar", "tzf", pkgs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"steward/Chart.yaml", "steward/values.schema.json", "steward/crds/etcd.steward.dev_etcdclusters.yaml",
		"steward/files/manager-role.yaml", "steward/templates/NOTES.txt"} {
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("the package lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "testdata") {
		t.Errorf("the package holds the test data (.helmignore):\n%s", out)
	}
}
