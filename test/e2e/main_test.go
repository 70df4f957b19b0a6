//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/etcd-steward/steward/test/e2e/framework"
)

// f is shared by all tests of the package: one set of clients per test binary.
var f *framework.Framework

func TestMain(m *testing.M) {
	var err error
	if f, err = framework.New(framework.ConfigFromEnv()); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
