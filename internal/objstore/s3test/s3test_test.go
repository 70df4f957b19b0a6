package s3test

import (
	"strings"
	"testing"
)

// A missing server binary is an error that says how to build it, never a skipped test.
func TestMissingBinaryIsAnError(t *testing.T) {
	t.Setenv("VERSITYGW_BIN", "/nonexistent/versitygw")
	if _, err := Binary(); err == nil || !strings.Contains(err.Error(), "VERSITYGW_BIN=/nonexistent/versitygw") || !strings.Contains(err.Error(), "hack/toolchain.sh versitygw") {
		t.Errorf("Binary() = %v", err)
	}
}
