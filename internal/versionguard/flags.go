package versionguard

import (
	"bufio"
	"embed"
	"fmt"
	"slices"
	"strings"
)

// The flags and feature gates of each minor, from the built binaries' `etcd --help`
// (hack/etcd-flags.sh writes flags/<minor>.txt). A minor without a file is not checked.
//
//go:embed flags/*.txt
var flagFiles embed.FS

// known is one minor's flags and gates.
type known struct{ flags, gates map[string]bool }

func knownOf(minor string) (known, bool) {
	b, err := flagFiles.ReadFile("flags/" + minor + ".txt")
	if err != nil {
		return known{}, false
	}
	k := known{flags: map[string]bool{}, gates: map[string]bool{}}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		kind, name, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		switch {
		case !ok:
		case kind == "flag":
			k.flags[name] = true
		case kind == "gate":
			k.gates[name] = true
		}
	}
	return k, true
}

// UnknownArgs lists the extraArgs (flag names without "--", as spec.options.extraArgs holds them)
// and the feature gates in their --feature-gates value that etcd version does not know, so a roll
// onto it is refused before a member crash-loops on "flag provided but not defined". Nil when all
// are known, or when Steward has no flag list for that minor.
func UnknownArgs(version string, extraArgs map[string]string) []string {
	k, ok := knownOf(Minor(version))
	if !ok {
		return nil
	}
	var out []string
	for flag, value := range extraArgs {
		if !k.flags[flag] {
			out = append(out, "--"+flag)
			continue
		}
		if flag != "feature-gates" {
			continue
		}
		for _, kv := range strings.Split(value, ",") {
			gate, _, _ := strings.Cut(strings.TrimSpace(kv), "=")
			if gate != "" && !k.gates[gate] {
				out = append(out, fmt.Sprintf("feature gate %s", gate))
			}
		}
	}
	slices.Sort(out)
	return out
}

// HasFlagList reports whether Steward knows version's flags (a file for its minor).
func HasFlagList(version string) bool {
	_, ok := knownOf(Minor(version))
	return ok
}
