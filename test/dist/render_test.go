package dist

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// renderFix is what to run when a generated file is stale.
const renderFix = "run `hack/render-install.sh` and commit the result"

// TestRenderedFilesUpToDate re-renders dist/install.yaml and the chart's copies of config/ into
// a temporary directory and compares them with the committed ones, byte for byte.
func TestRenderedFilesUpToDate(t *testing.T) {
	root := repoRoot(t)
	tmp := t.TempDir()
	if _, err := run(t, []string{"KUBECTL=" + kubectl(t)}, filepath.Join(root, "hack", "render-install.sh"), tmp); err != nil {
		t.Fatal(err)
	}
	// The generated directories hold nothing else: a CRD dropped from config/ goes from crds/ too.
	for _, dir := range []string{"dist", filepath.Join(chartDir, "crds"), filepath.Join(chartDir, "files")} {
		want, got := listFiles(t, filepath.Join(tmp, dir)), listFiles(t, filepath.Join(root, dir))
		for _, f := range got {
			if !slices.Contains(want, f) {
				t.Errorf("%s is not rendered by hack/render-install.sh: delete it, or render it from config/", filepath.Join(dir, f))
			}
		}
		for _, f := range want {
			rel := filepath.Join(dir, f)
			fresh, err := os.ReadFile(filepath.Join(tmp, rel))
			if err != nil {
				t.Fatal(err)
			}
			committed, err := os.ReadFile(filepath.Join(root, rel))
			switch {
			case os.IsNotExist(err):
				t.Errorf("%s is missing: %s", rel, renderFix)
			case err != nil:
				t.Fatal(err)
			case !bytes.Equal(fresh, committed):
				t.Errorf("%s differs from what config/ renders (%s): %s", rel, firstDifference(committed, fresh), renderFix)
			}
		}
	}
}

func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// firstDifference names the first line where committed and fresh differ.
func firstDifference(committed, fresh []byte) string {
	a, b := bytes.Split(committed, []byte("\n")), bytes.Split(fresh, []byte("\n"))
	for i := range max(len(a), len(b)) {
		var x, y []byte
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if !bytes.Equal(x, y) {
			return fmt.Sprintf("line %d: committed %s, rendered %s", i+1, quote(x, i < len(a)), quote(y, i < len(b)))
		}
	}
	return "same lines"
}

func quote(line []byte, ok bool) string {
	if !ok {
		return "<end of file>"
	}
	if len(line) > 80 {
		return strconv.Quote(string(line[:80])) + "..."
	}
	return strconv.Quote(string(line))
}
