package manager

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryCRDIsInstalled: a CRD generated into config/crd/bases but missing from the kustomization
// installs an operator whose controllers wait forever for their kinds (it happened with EtcdBackup).
func TestEveryCRDIsInstalled(t *testing.T) {
	root := filepath.Join("..", "..", "config", "crd")
	k, err := os.ReadFile(filepath.Join(root, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in bases (%v)", err)
	}
	for _, f := range files {
		if !strings.Contains(string(k), "bases/"+filepath.Base(f)) {
			t.Errorf("%s is not listed in config/crd/kustomization.yaml", filepath.Base(f))
		}
	}
}
