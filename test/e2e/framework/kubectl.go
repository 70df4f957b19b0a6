package framework

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Kubectl runs kubectl (from PATH; hack/e2e.sh puts the built one there) against the
// cluster under test and returns its stdout. Tests use it where the user would:
// `kubectl exec … -- etcdctl …` proves the image's shell layer, not just the API.
func (f *Framework) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", f.Kubeconfig}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
