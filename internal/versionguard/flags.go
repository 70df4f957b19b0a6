package versionguard

import (
	"bufio"
	"embed"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// The flags and feature gates of each minor, from the built binaries' `etcd --help`
// (hack/etcd-flags.sh writes flags/<minor>.txt). A minor without a file is not checked.
//
//go:embed flags/*.txt
var flagFiles embed.FS

// known is one minor's flags and gates.
type known struct{ flags, gates map[string]bool }

// knownOf is one minor's list; false when Steward has none for it.
func knownOf(minor string) (known, bool) {
	k, ok := lists()[minor]
	return k, ok
}

// lists are every embedded list by minor, parsed once.
var lists = sync.OnceValue(func() map[string]known {
	out := map[string]known{}
	entries, _ := flagFiles.ReadDir("flags")
	for _, e := range entries {
		minor := strings.TrimSuffix(e.Name(), ".txt")
		if k, ok := parseList(minor); ok {
			out[minor] = k
		}
	}
	return out
})

func parseList(minor string) (known, bool) {
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
// onto it is refused before a member crash-loops on "flag provided but not defined". Only names
// some minor's --help lists are judged: --help is etcd's hand-written usage text, and a flag it
// leaves out is not evidence of anything. Nil when all are known, or when Steward has no flag list
// for that minor.
func UnknownArgs(version string, extraArgs map[string]string) []string {
	k, ok := knownOf(Minor(version))
	if !ok {
		return nil
	}
	all := knownAnywhere()
	var out []string
	for flag, value := range extraArgs {
		if !k.flags[flag] {
			if all.flags[flag] {
				out = append(out, "--"+flag)
			}
			continue
		}
		if flag != "feature-gates" {
			continue
		}
		for _, kv := range strings.Split(value, ",") {
			gate, _, _ := strings.Cut(strings.TrimSpace(kv), "=")
			if gate != "" && !k.gates[gate] && all.gates[gate] {
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

// knownAnywhere is the union of every minor's flags and gates.
func knownAnywhere() known {
	all := known{flags: map[string]bool{}, gates: map[string]bool{}}
	for _, k := range lists() {
		maps.Copy(all.flags, k.flags)
		maps.Copy(all.gates, k.gates)
	}
	return all
}
