package versionguard

import (
	"slices"
	"strings"
	"testing"
)

func TestCheckUpgrade(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		want     string // substring of the refusal; "" passes
	}{
		{"3.5.35", "3.6.16", ""},
		{"3.5.32", "3.6.0", ""},
		{"3.5.31", "3.6.16", "set spec.version to 3.5.32 (or a later 3.5) first, then 3.6.16"},
		{"3.5.17", "3.6.16", "https://etcd.io/docs/v3.6/upgrades/upgrade_3_6/"},
		{"3.6.10", "3.7.3", "run 3.6.11 or later before 3.7"},
		{"3.6.11", "3.7.3", ""},
		{"3.6.10", "3.6.16", ""}, // a patch: no minimum
		{"3.4.30", "3.5.35", ""}, // no documented minimum
		{"3.5.17", "3.7.3", ""},  // two minors: the one-minor rule's business
		{"3.5.17-rc.1", "3.6.0", "3.5.32"},
		{"custom", "3.6.16", ""},
	} {
		got := CheckUpgrade(tc.from, tc.to)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("CheckUpgrade(%s, %s) = %q, want %q", tc.from, tc.to, got, tc.want)
		}
	}
}

func TestCheckDowngrade(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		want     string
	}{
		{"3.7.3", "3.6.16", ""},
		{"3.6.16", "3.5.35", ""},
		{"3.7.3", "3.5.35", "set spec.version to a 3.6 release first, and 3.5.35 once every member runs it"},
		{"3.5.35", "3.4.30", "back from 3.6 and 3.7 only"},
		{"3.7.3", "2.3.8", "another major"},
		{"3.7.3", "3.7.1", ""}, // a patch down is no downgrade
		{"3.6.16", "3.7.3", ""},
		{"3.7", "3.6.16", "must be X.Y.Z"},
	} {
		got := CheckDowngrade(tc.from, tc.to)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("CheckDowngrade(%s, %s) = %q, want %q", tc.from, tc.to, got, tc.want)
		}
	}
}

func TestIsDowngrade(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		want     bool
	}{
		{"3.7.3", "3.6.16", true}, {"3.6.0", "3.5.35", true}, {"3.7.3", "3.5.35", false},
		{"3.6.16", "3.6.1", false}, {"3.6.16", "3.7.3", false}, {"x", "3.6.1", false},
	} {
		if got := IsDowngrade(tc.from, tc.to); got != tc.want {
			t.Errorf("IsDowngrade(%s, %s) = %v", tc.from, tc.to, got)
		}
	}
}

func TestUnknownArgs(t *testing.T) {
	for _, tc := range []struct {
		version string
		args    map[string]string
		want    []string
	}{
		{"3.5.35", map[string]string{"feature-gates": "InitialCorruptCheck=true"}, []string{"--feature-gates"}},
		{"3.5.35", map[string]string{"experimental-compact-hash-check-enabled": "true"}, nil},
		{"3.6.16", map[string]string{"enable-v2": "true"}, []string{"--enable-v2"}},
		{"3.6.16", map[string]string{"feature-gates": "StopGRPCServiceOnDefrag=true, FastLeaseKeepAlive=true"},
			[]string{"feature gate FastLeaseKeepAlive"}},
		{"3.7.3", map[string]string{"feature-gates": "FastLeaseKeepAlive=true"}, nil},
		{"3.7.3", map[string]string{"experimental-initial-corrupt-check": "true", "max-learners": "2"},
			[]string{"--experimental-initial-corrupt-check"}},
		{"3.9.0", map[string]string{"anything": "x"}, nil}, // no flag list: not checked
		// Names no minor's --help lists (a hidden flag, a gate of a later release) are not judged.
		{"3.5.35", map[string]string{"experimental-max-learners": "2", "log-outputs": "stderr"}, nil},
		{"3.6.16", map[string]string{"feature-gates": "SomeFutureGate=true"}, nil},
	} {
		if got := UnknownArgs(tc.version, tc.args); !slices.Equal(got, tc.want) {
			t.Errorf("UnknownArgs(%s, %v) = %v, want %v", tc.version, tc.args, got, tc.want)
		}
	}
	if !HasFlagList("3.6.1") || HasFlagList("3.9.0") {
		t.Error("HasFlagList: 3.6 has a list, 3.9 none")
	}
}

// The embedded lists come from the binaries: what they must say for the checks above to mean anything.
func TestFlagListsAreTheBinaries(t *testing.T) {
	for _, minor := range []string{"3.5", "3.6", "3.7"} {
		k, ok := knownOf(minor)
		if !ok || len(k.flags) < 100 || !k.flags["data-dir"] || !k.flags["listen-client-urls"] {
			t.Errorf("%s: flag list missing or short (%d flags)", minor, len(k.flags))
		}
	}
	if k, _ := knownOf("3.6"); !k.gates["InitialCorruptCheck"] || !k.flags["feature-gates"] {
		t.Error("3.6 lists feature gates")
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]bool{"3.6.16": true, "v3.6.0-rc.1": true, "3.6": false, "latest": false, "3.6.1+build": true} {
		if _, ok := Parse(in); ok != want {
			t.Errorf("Parse(%q) ok = %v", in, ok)
		}
	}
	if Minor("v3.7.3") != "3.7" || Minor("3.6") != "3.6" || Minor("x") != "" || Minor("3") != "" {
		t.Error("Minor")
	}
}
