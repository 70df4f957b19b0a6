// Package authplan decides, one step at a time, how a cluster's etcd authentication comes to match
// its spec: Steward's own access first, then the declared roles and users, etcd auth switched on
// last, and never a step that would lock the operator out. It is pure: the controller gathers the
// facts (spec, what etcd reports, what status recorded) and carries out the one step returned.
package authplan

import "slices"

// Access is what a permission allows, as etcd names it.
type Access string

// The three kinds of etcd permission.
const (
	Read      Access = "read"
	Write     Access = "write"
	ReadWrite Access = "readwrite"
)

// Permission is one etcd role permission. RangeEnd means what etcd means by it: empty for one
// key, the prefix's successor for a prefix, "\x00" for everything from Key on.
type Permission struct {
	Key, RangeEnd string
	Access        Access
}

// Role is a role and its permissions.
type Role struct {
	Name        string
	Permissions []Permission
}

// User is a user Steward is to keep in etcd.
type User struct {
	Name  string
	Roles []string
	// PasswordDigest identifies the password the user is to have (a digest of its Secret's
	// value, never the value); empty for a user that authenticates by certificate only.
	PasswordDigest string
	// PasswordMissing, when set, says why the password cannot be read (the Secret or its key is
	// missing). The user is not created or changed until it can be.
	PasswordMissing string
}

// Identity names the etcd users Steward keeps for itself. Their names are reserved.
type Identity struct {
	// Operator is the common name of the operator's client certificate.
	Operator string
	// Backup is the common name of the certificate backup Jobs and the streamer present.
	Backup string
	// SharedClient is the common name of the cluster's shared application certificate
	// (<cluster>-client): it keeps full access so clients that predate auth keep working.
	SharedClient string
}

// Names Steward reserves in every cluster with auth: etcd's superuser and role, and the role that
// grants the shared client everything.
const (
	RootUser       = "root"
	RootRole       = "root"
	FullAccessRole = "steward-full-access"
)

// FullAccess is the permission of FullAccessRole: every key, read and write.
var FullAccess = Permission{Key: "\x00", RangeEnd: "\x00", Access: ReadWrite}

// Observed is etcd's auth state as read this reconcile.
type Observed struct {
	Enabled bool
	Roles   map[string][]Permission
	Users   map[string][]string // user → roles
	// Err is set when the state could not be read; nothing is decided from a guess.
	Err error
	// LockedOut: etcd says auth is on and refuses the operator's identity. Only a human with
	// root can let Steward back in.
	LockedOut bool
}

// Facts is everything one decision reads.
type Facts struct {
	// Declared is false when the spec has no auth section at all.
	Declared bool
	// Enabled is spec.auth.enabled.
	Enabled bool
	Roles   []Role
	Users   []User
	Self    Identity

	Etcd Observed

	// AutoCompaction: spec.options sets etcd's auto-compaction. With auth on only root may compact,
	// so without it nothing but Steward-scheduled or root clients would ever compact history.
	AutoCompaction bool

	// CRLServed: every member runs with --client-crl-file and serves the revocation list that
	// holds every revoked serial status records. Tenant users are created only then, so that
	// deleting one later can revoke its certificate before the name can come back.
	CRLServed bool

	// ManagedUsers and ManagedRoles are the names status records Steward created (intent written
	// before each create). Only these are ever deleted.
	ManagedUsers, ManagedRoles []string
	// Passwords is the password digest status records as applied, per user.
	Passwords map[string]string
	// Revoked: every certificate Steward issued the user is on the recorded revocation list.
	Revoked map[string]bool
	// OpenSinceRevoke names users whose certificates were revoked after some member's etcd
	// started: etcd checks the revocation list only when a connection opens, so a connection
	// opened before may still present a revoked certificate, and would speak as a new user of
	// that name. Such a name is created again only after every member restarted.
	OpenSinceRevoke map[string]bool
}

func (f Facts) own() []User {
	return []User{
		{Name: RootUser, Roles: []string{RootRole}},
		{Name: f.Self.Operator, Roles: []string{RootRole}},
		{Name: f.Self.Backup, Roles: []string{RootRole}},
		{Name: f.Self.SharedClient, Roles: []string{FullAccessRole}},
	}
}

// reserved says whether a user or role name is Steward's own.
func (f Facts) reserved(name string) bool {
	return slices.Contains([]string{RootUser, RootRole, FullAccessRole, f.Self.Operator, f.Self.Backup, f.Self.SharedClient}, name)
}
