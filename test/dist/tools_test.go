// Package dist tests the distribution: dist/install.yaml and the chart's copies are what
// hack/render-install.sh renders from config/, the Helm chart renders the same objects as the
// kustomize bundle, and the RBAC each of the chart's modes grants is the reviewed list in
// charts/steward/testdata.
//
// It needs kubectl (its built-in kustomize; `make test` builds it for envtest) and helm
// (`hack/toolchain.sh helm`), both built from the Go module proxy into _out/.
package dist

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

const (
	// The release the equivalence tests render: its names match config/default's.
	releaseName      = "steward"
	releaseNamespace = "steward-system"
	chartDir         = "charts/steward"
)

// repoRoot is the repository's top directory (this package is test/dist).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// tool finds a binary: $ENV, else the first candidate under the repository that exists.
func tool(t *testing.T, env, hint string, candidates ...string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if !filepath.IsAbs(c) {
			c = filepath.Join(repoRoot(t), c)
		}
		if _, err := os.Stat(c); err == nil {
			return c
		}
	}
	t.Fatalf("no %s: %s, or set %s", strings.ToLower(env), hint, env)
	return ""
}

// kubectl is the kubectl hack/toolchain.sh builds (KUBEBUILDER_ASSETS holds it under make test).
func kubectl(t *testing.T) string {
	t.Helper()
	var assets string
	if a := os.Getenv("KUBEBUILDER_ASSETS"); a != "" {
		assets = filepath.Join(a, "kubectl")
	}
	return tool(t, "KUBECTL", "run `make test` (hack/toolchain.sh envtest builds it)",
		assets, filepath.Join("_out", "envtest", "kubectl"))
}

// helm is the helm hack/toolchain.sh builds.
func helm(t *testing.T) string {
	t.Helper()
	return tool(t, "HELM", "run `hack/toolchain.sh helm` (make test's helm prerequisite)",
		filepath.Join("_out", "bin", "helm"))
}

// run runs a command in the repository root and returns its stdout.
func run(t *testing.T, env []string, name string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// helmEnv keeps helm away from the user's configuration and caches.
func helmEnv(t *testing.T) []string {
	t.Helper()
	d := t.TempDir()
	return []string{"HELM_CONFIG_HOME=" + filepath.Join(d, "config"), "HELM_CACHE_HOME=" + filepath.Join(d, "cache"),
		"HELM_DATA_HOME=" + filepath.Join(d, "data")}
}

// helmTemplate renders the chart as release steward in steward-system, CRDs included, with
// `--set`-style values and values files.
func helmTemplate(t *testing.T, set []string, valuesFiles ...string) ([]byte, error) {
	t.Helper()
	args := []string{"template", releaseName, chartDir, "--namespace", releaseNamespace, "--include-crds"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	for _, f := range valuesFiles {
		args = append(args, "--values", f)
	}
	return run(t, helmEnv(t), helm(t), args...)
}

// mustHelmTemplate is helmTemplate failing the test on an error.
func mustHelmTemplate(t *testing.T, set []string, valuesFiles ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := helmTemplate(t, set, valuesFiles...)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, out)
}

// kustomize renders a kustomization directory (relative to the repository root).
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	out, err := run(t, nil, kubectl(t), "kustomize", dir)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, out)
}

// decode parses a multi-document YAML stream, skipping empty documents.
func decode(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decoding rendered YAML: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}
