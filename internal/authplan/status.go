package authplan

import (
	"fmt"
	"slices"
)

// Phase is status.auth.phase: where the cluster is between auth off and auth on.
type Phase string

// Phases. Steward is Reconciled only in Off or On with nothing left to do.
const (
	Off       Phase = "Off"
	Enabling  Phase = "Enabling"
	On        Phase = "On"
	Syncing   Phase = "Syncing"
	Disabling Phase = "Disabling"
	Refused   Phase = "Refused"
	Unknown   Phase = "Unknown"
	// Undeclared: etcd has authentication on while spec.auth is not declared (a restore of a
	// backup taken with auth on, or auth turned on by hand). Steward changes nothing about it.
	Undeclared Phase = "Undeclared"
)

// UndeclaredHelp says what auth on without spec.auth means and the two ways out.
func UndeclaredHelp(self Identity) string {
	return fmt.Sprintf("etcd authentication is on but spec.auth is not declared (restored from a backup taken with auth on, or "+
		"turned on by hand): the shared client certificate (%s) works only if etcd has that user, and backups need a root user; "+
		"declare spec.auth with enabled: true so Steward keeps its own users, or with enabled: false to turn it off", self.SharedClient)
}

// CompactionHint is status.auth.message while auth is on and etcd compacts nothing by itself. etcd
// lets only root compact (kvServer.Compact checks admin permission, 3.5 to 3.7), so a
// kube-apiserver or any client on its own user that compacts is refused and history grows until the
// backend quota raises NOSPACE.
const CompactionHint = "auth is on and etcd's auto-compaction is not set: etcd lets only root compact, so clients on their " +
	"own users (a kube-apiserver's compactor among them) cannot, and history grows until NOSPACE; set " +
	"spec.options.autoCompactionMode and autoCompactionRetention (for example periodic, 5m)"

// Message is status.auth.message: the undeclared help, the step Steward waits on, or, with
// nothing left to do and auth on, the compaction hint while etcd compacts nothing by itself.
func Message(f Facts, s Step) string {
	switch p := PhaseOf(f, s); {
	case p == Undeclared:
		return UndeclaredHelp(f.Self)
	case !s.Done():
		return s.String()
	case p == On && !f.AutoCompaction:
		return CompactionHint
	}
	return ""
}

// PhaseOf names where the cluster stands given the facts and the step Decide returned for them.
func PhaseOf(f Facts, s Step) Phase {
	switch {
	case s.Kind == Refuse:
		return Refused
	case !f.Declared && f.Etcd.Enabled:
		return Undeclared
	case !f.Declared:
		return Off
	case f.Etcd.Err != nil:
		return Unknown
	case !f.Enabled && f.Etcd.Enabled:
		return Disabling
	case f.Enabled && !f.Etcd.Enabled:
		return Enabling
	case !s.Done():
		return Syncing
	case f.Enabled:
		return On
	}
	return Off
}

// UserState is one declared user's line in status.
type UserState struct {
	Name  string
	State string // Ready, Pending, WaitingForPassword
	// Message says what the user waits for.
	Message string
}

// Users reports each declared user's state, in name order.
func Users(f Facts) []UserState {
	out := make([]UserState, 0, len(f.Users))
	for _, u := range sortedUsers(f.Users) {
		st := UserState{Name: u.Name, State: "Ready"}
		have, exists := f.Etcd.Users[u.Name]
		switch {
		case u.PasswordMissing != "":
			st.State, st.Message = "WaitingForPassword", u.PasswordMissing
		case !exists:
			st.State, st.Message = "Pending", "not created yet"
		case u.PasswordDigest != "" && f.Passwords[u.Name] != u.PasswordDigest:
			st.State, st.Message = "Pending", "password not applied yet"
		case !sameSet(have, u.Roles):
			st.State, st.Message = "Pending", "roles not granted yet"
		}
		out = append(out, st)
	}
	return out
}

func sortedUsers(us []User) []User {
	c := slices.Clone(us)
	slices.SortFunc(c, func(a, b User) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return c
}

func sameSet(a, b []string) bool {
	return slices.Equal(sortedCopy(a), sortedCopy(b))
}
