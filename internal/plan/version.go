package plan

import (
	"github.com/etcd-steward/steward/internal/versionguard"
)

// VersionStep classifies a change of etcd version.
type VersionStep string

const (
	StepSame VersionStep = "Same"
	// StepPatch: same major.minor (either direction: etcd supports patch changes within a minor).
	StepPatch VersionStep = "Patch"
	// StepMinorUp: exactly one minor up, the only upgrade etcd supports in one go.
	StepMinorUp VersionStep = "MinorUp"
	// StepDowngrade: an older minor or major. etcd's downgrade path (downgrade enable + a roll) is not
	// implemented, so it is refused.
	StepDowngrade VersionStep = "Downgrade"
	// StepSkippedMinor: two or more minors up, or a new major: a mixed cluster etcd does not support.
	StepSkippedMinor VersionStep = "SkippedMinor"
	// StepUnparseable: either side is not X.Y.Z (a custom build); accepted with a warning.
	StepUnparseable VersionStep = "Unparseable"
)

// Allowed reports whether the step may be rolled.
func (s VersionStep) Allowed() bool {
	return s != StepDowngrade && s != StepSkippedMinor
}

// ClassifyVersion classifies the change from one version to another. A leading "v" and a
// pre-release or build suffix are tolerated (etcd reports "3.6.0-rc.1"); only the numbers count.
func ClassifyVersion(from, to string) VersionStep {
	a, okA := parseVersion(from)
	b, okB := parseVersion(to)
	switch {
	case !okA || !okB:
		return StepUnparseable
	case a == b:
		return StepSame
	case a[0] != b[0]:
		if b[0] < a[0] {
			return StepDowngrade
		}
		return StepSkippedMinor
	case b[1] < a[1]:
		return StepDowngrade
	case b[1] == a[1]:
		return StepPatch
	case b[1] == a[1]+1:
		return StepMinorUp
	}
	return StepSkippedMinor
}

// parseVersion reads major, minor and patch of a full X.Y.Z version (versionguard.Parse).
func parseVersion(s string) ([3]int, bool) { return versionguard.Parse(s) }
