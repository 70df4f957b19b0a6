package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The member binary is copied into every member Pod at each start: it must not grow into the
// operator again. A dependency on the Kubernetes client or the controller runtime (or the backup
// data path) is what made the operator's binary 89 MB.
func TestLinksNoOperatorCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if !strings.Contains(string(out), "github.com/etcd-steward/steward/internal/datacheck") {
		t.Fatalf("go list -deps names no data check:\n%s", out)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, banned := range []string{"k8s.io/client-go", "sigs.k8s.io/controller-runtime",
			"github.com/etcd-steward/steward/internal/snapshot", "github.com/etcd-steward/steward/internal/manager",
			"github.com/aws/", "github.com/minio/"} {
			if strings.HasPrefix(p, banned) {
				t.Errorf("steward-member links %s", p)
			}
		}
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"install-self"}, {"member", "run-etcd"}} {
		if code := run(args); code != 2 {
			t.Errorf("run(%q) = %d, want 2", args, code)
		}
	}
	if code := run([]string{"run-etcd"}); code != 2 {
		t.Errorf("run-etcd without flags = %d, want 2", code)
	}
}
