// Package versionguard holds what etcd's own documentation says about moving between versions, as
// data with its sources, and the pure checks Steward runs on it before an upgrade or a downgrade:
// the patch level a minor must reach before the next minor, which minors etcd's downgrade protocol
// goes back from, and the flags and feature gates each minor knows.
package versionguard

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/semver"
)

// Minimum is the patch level etcd's upgrade guide asks every member of a minor to run before the
// cluster moves to the next minor.
type Minimum struct {
	From, To string // "3.5", "3.6"
	Patch    string // "3.5.32"
	Source   string
}

// Minimums are etcd's own numbers. The 3.5 → 3.6 one was raised as upgrade blockers were fixed
// (3.5.20, 3.5.24, 3.5.26, then 3.5.32 in the guide of 2026-08); the newest is kept.
var Minimums = []Minimum{
	{From: "3.5", To: "3.6", Patch: "3.5.32", Source: "https://etcd.io/docs/v3.6/upgrades/upgrade_3_6/"},
	{From: "3.6", To: "3.7", Patch: "3.6.11", Source: "https://etcd.io/docs/v3.7/upgrades/upgrade_3_7/"},
}

// Downgrades are the minors Steward takes back one minor through etcd's downgrade protocol
// (downgrade validate/enable/cancel, storage version lowered before the binaries), with the guide.
// 3.5 has the API but no supported downgrade. 3.6 → 3.5 was withheld for a while: a full-suite
// run saw a non-linearizable history in the mixed 3.5/3.6 cluster, which turned out to be the
// test's (a second traffic run on keys the first left, checked as if absent; docs/upgrade.md).
var Downgrades = map[string]string{
	"3.6": "https://etcd.io/docs/v3.6/downgrades/downgrade_3_6/",
	"3.7": "https://etcd.io/docs/v3.7/downgrades/downgrade_3_7/",
}

// Withheld are downgrades etcd supports but Steward refuses, with why (none now).
var Withheld = map[string]string{}

// Parse reads major, minor and patch of a full X.Y.Z version; a leading "v" and a pre-release or
// build suffix are tolerated (etcd reports "3.6.0-rc.1"). Shorthands such as "3.6" are refused.
func Parse(s string) ([3]int, bool) {
	var v [3]int
	c := "v" + strings.TrimPrefix(s, "v")
	if !semver.IsValid(c) {
		return v, false
	}
	core := strings.TrimSuffix(strings.TrimSuffix(c, semver.Build(c)), semver.Prerelease(c))
	if strings.Count(core, ".") != 2 {
		return v, false
	}
	for i, p := range strings.SplitN(strings.TrimPrefix(core, "v"), ".", 3) {
		n, err := strconv.Atoi(p)
		if err != nil {
			return v, false
		}
		v[i] = n
	}
	return v, true
}

// Minor is "major.minor" of a version: X.Y.Z, or X.Y as etcd reports cluster and downgrade
// versions in some answers. "" when it does not parse.
func Minor(s string) string {
	v, ok := Parse(s)
	if !ok && strings.Count(s, ".") == 1 {
		v, ok = Parse(s + ".0")
	}
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d.%d", v[0], v[1])
}

// CheckUpgrade says why etcd from may not be upgraded to etcd to (one minor up), or "": the patch
// etcd's guide asks for first. Versions that do not parse, or steps without a documented minimum,
// pass.
func CheckUpgrade(from, to string) string {
	f, okF := Parse(from)
	m, okM := Parse(Minor(to) + ".0")
	if !okF || !okM || f[0] != m[0] || m[1] != f[1]+1 {
		return ""
	}
	for _, min := range Minimums {
		if min.From != Minor(from) || min.To != Minor(to) {
			continue
		}
		if p, _ := Parse(min.Patch); f[2] < p[2] {
			return fmt.Sprintf("etcd's upgrade guide asks every %s member to run %s or later before %s (%s): "+
				"set spec.version to %s (or a later %s) first, then %s", min.From, min.Patch, min.To, min.Source,
				min.Patch, min.From, to)
		}
	}
	return ""
}

// CheckDowngrade says why etcd from may not be downgraded to etcd to through etcd's downgrade
// protocol, with the path that works, or "" when it may (exactly one minor down, from a minor
// whose downgrade etcd supports).
func CheckDowngrade(from, to string) string {
	f, okF := Parse(from)
	t, okT := Parse(to)
	switch {
	case !okF || !okT:
		return fmt.Sprintf("a downgrade from %q to %q cannot be checked: both must be X.Y.Z", from, to)
	case f[0] != t[0]:
		return fmt.Sprintf("etcd %s cannot be downgraded to another major version (%s)", from, to)
	case t[1] >= f[1]:
		return ""
	case t[1] < f[1]-1:
		return fmt.Sprintf("etcd downgrades one minor version at a time: set spec.version to a %d.%d release "+
			"first, and %s once every member runs it", f[0], f[1]-1, to)
	}
	if why, ok := Withheld[Minor(from)]; ok {
		return fmt.Sprintf("etcd %s is not downgraded by Steward: %s", from, why)
	}
	if _, ok := Downgrades[Minor(from)]; !ok {
		return fmt.Sprintf("etcd %s cannot be downgraded: Steward takes etcd's downgrade protocol back from %s only; "+
			"a restore from a backup taken on %s is the way back", from, supported(), to)
	}
	return ""
}

// IsDowngrade reports whether to is exactly one minor below from (same major).
func IsDowngrade(from, to string) bool {
	f, okF := Parse(from)
	t, okT := Parse(to)
	return okF && okT && f[0] == t[0] && t[1] == f[1]-1
}

func supported() string {
	var out []string
	for _, m := range []string{"3.6", "3.7", "3.8", "3.9"} {
		if _, ok := Downgrades[m]; ok {
			out = append(out, m)
		}
	}
	return strings.Join(out, " and ")
}
