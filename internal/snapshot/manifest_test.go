package snapshot

import (
	"strings"
	"testing"
)

// The data format decides, not the server: a 3.6 server reports storage version 3.5.0 (or none)
// until its version monitor upgrades the schema a few seconds after it started, and etcd 3.5
// restores what it took in that window.
func TestCheckMinor(t *testing.T) {
	for _, tc := range []struct {
		name, storage, server, max, want string
	}{
		{name: "no limit", storage: "3.6.0", server: "3.6.16"},
		{name: "same minor", storage: "3.6.0", server: "3.6.16", max: "3.6"},
		{name: "newer storage", storage: "3.6.0", server: "3.6.16", max: "3.5", want: "storage version is 3.6.0, newer than etcd 3.5 that would restore it: restore with etcd 3.6 or later"},
		{name: "schema not upgraded yet", storage: "3.5.0", server: "3.6.16", max: "3.5"},
		{name: "no storage version: the server's", server: "3.6.16", max: "3.5", want: "etcd version is 3.6.16"},
		{name: "older snapshot", server: "3.5.17", max: "3.6"},
		{name: "nothing known", max: "3.5"},
		{name: "bad limit", server: "3.6.16", max: "three", want: `max minor "three"`},
		{name: "bad version", storage: "x", max: "3.6", want: `storage version "x" is not a version`},
		{name: "newer major", server: "4.0.0", max: "3.6", want: "restore with etcd 4.0 or later"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkMinor(tc.storage, tc.server, tc.max)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("checkMinor(%q, %q, %q) = %v, want %q", tc.storage, tc.server, tc.max, err, tc.want)
			}
		})
	}
}
