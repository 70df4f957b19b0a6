//go:build !failpoints

package failpoint

import (
	"context"
	"testing"
)

type testKey struct{}

func TestReleaseBuildIgnoresTheAnnotation(t *testing.T) {
	if Enabled {
		t.Fatal("Enabled is true without the failpoints tag")
	}
	ctx := context.WithValue(context.Background(), testKey{}, "x")
	armed := WithArmed(ctx, BeforeMemberAdd)
	if armed != ctx {
		t.Fatal("WithArmed changed the context in a release build")
	}
	// Returning at all is the test: an armed point in a release build must not stop anything.
	for _, p := range Points {
		Hit(WithArmed(ctx, p), p)
		if n := Hits(p); n != 0 {
			t.Errorf("Hits(%q) = %d in a release build", p, n)
		}
	}
}
