//go:build !failpoints

package failpoint

import "context"

// Enabled says whether this binary was built with the points.
const Enabled = false

// WithArmed returns ctx unchanged: release builds ignore the annotation.
func WithArmed(ctx context.Context, _ string) context.Context { return ctx }

// Hit does nothing: release builds have no points.
func Hit(context.Context, string) {}

// Hits is always zero: release builds have no points.
func Hits(string) uint64 { return 0 }
