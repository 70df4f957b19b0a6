package authplan

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Kind is what a step does.
type Kind string

// Step kinds. Every etcd step is idempotent (the controller maps "already so" to success), so a
// step repeated after a crash is harmless.
const (
	Nothing Kind = "Nothing"
	// Wait: something outside the planner must happen first (Reason says what).
	Wait Kind = "Wait"
	// Refuse: the spec or etcd's state would lock Steward out or is not Steward's to change.
	Refuse Kind = "Refuse"
	// Record writes status before acting: the names Steward is about to create (so a crash after
	// the create still leaves them Steward's) or forgets names it deleted.
	Record Kind = "Record"
	// RevokeCertificates records the user's certificate serials as revoked (status, then the
	// revocation list) before the user is deleted.
	RevokeCertificates Kind = "RevokeCertificates"

	RoleAdd      Kind = "RoleAdd"
	RoleGrant    Kind = "RoleGrant"
	RoleRevoke   Kind = "RoleRevoke"
	RoleDelete   Kind = "RoleDelete"
	UserAdd      Kind = "UserAdd"
	UserPassword Kind = "UserPassword"
	UserGrant    Kind = "UserGrant"
	UserRevoke   Kind = "UserRevoke"
	UserDelete   Kind = "UserDelete"
	AuthEnable   Kind = "AuthEnable"
	AuthDisable  Kind = "AuthDisable"
)

// Step is the one thing to do next.
type Step struct {
	Kind       Kind
	User, Role string
	Permission Permission
	// WithPassword: UserAdd sets the user's password from its Secret (else a certificate-only user).
	WithPassword bool
	// ManagedUsers and ManagedRoles are status's new lists (Record only).
	ManagedUsers, ManagedRoles []string
	Reason                     string
}

// Done says whether etcd's auth matches the spec.
func (s Step) Done() bool { return s.Kind == Nothing }

// LockoutHelp is what a user runs when etcd auth is on and Steward's identity has no root access.
func LockoutHelp(self Identity) string {
	return fmt.Sprintf("etcd authentication is on and the operator's identity %q cannot read it; as root run "+
		"`etcdctl user add %s --no-password` and `etcdctl user grant-role %s root`", self.Operator, self.Operator, self.Operator)
}

// Decide returns the next step. The order is what keeps Steward in: its own users before any
// other change, the revocation list before tenant users, auth switched on last.
func Decide(f Facts) Step {
	if !f.Declared {
		return Step{Kind: Nothing, Reason: "spec.auth is not set"}
	}
	if f.Etcd.LockedOut {
		return Step{Kind: Refuse, Reason: LockoutHelp(f.Self)}
	}
	if f.Etcd.Err != nil {
		return Step{Kind: Wait, Reason: "reading etcd's auth state: " + f.Etcd.Err.Error()}
	}
	if s, bad := refuseSpec(f); bad {
		return s
	}
	if !f.Enabled && f.Etcd.Enabled {
		return Step{Kind: AuthDisable, Reason: "spec.auth.enabled is false"}
	}
	if s, ok := ownAccess(f); ok {
		return s
	}
	if s, ok := syncRoles(f); ok {
		return s
	}
	if s, ok := syncUsers(f); ok {
		return s
	}
	if f.Enabled && !f.Etcd.Enabled {
		return Step{Kind: AuthEnable, Reason: "Steward's own users, the declared roles and users are in place"}
	}
	if s, ok := removeUndeclared(f); ok {
		return s
	}
	return Step{Kind: Nothing}
}

// refuseSpec catches what admission should have refused already (defence in depth: a spec
// written before the rule existed).
func refuseSpec(f Facts) (Step, bool) {
	declared := map[string]bool{RootRole: true, FullAccessRole: true}
	for _, r := range f.Roles {
		if f.reserved(r.Name) {
			return Step{Kind: Refuse, Role: r.Name, Reason: fmt.Sprintf("role %q is Steward's own; choose another name", r.Name)}, true
		}
		declared[r.Name] = true
	}
	for _, u := range f.Users {
		if f.reserved(u.Name) {
			return Step{Kind: Refuse, User: u.Name, Reason: fmt.Sprintf("user %q is Steward's own; choose another name", u.Name)}, true
		}
		for _, r := range u.Roles {
			if !declared[r] {
				return Step{Kind: Refuse, User: u.Name, Role: r, Reason: fmt.Sprintf("user %q has role %q, which spec.auth.roles does not declare", u.Name, r)}, true
			}
		}
	}
	return Step{}, false
}

func ownAccess(f Facts) (Step, bool) {
	if s, ok := syncRole(f, Role{Name: FullAccessRole, Permissions: []Permission{FullAccess}}, true); ok {
		return s, true
	}
	for _, u := range f.own() {
		if s, ok := syncUser(f, u, true); ok {
			return s, true
		}
	}
	return Step{}, false
}

func syncRoles(f Facts) (Step, bool) {
	for _, r := range sortedRoles(f.Roles) {
		if s, ok := syncRole(f, r, false); ok {
			return s, true
		}
	}
	return Step{}, false
}

// syncRole brings one role's permissions to the declared ones. A role Steward is about to create
// is recorded first; a role that already existed is kept in sync but never deleted.
func syncRole(f Facts, r Role, own bool) (Step, bool) {
	have, exists := f.Etcd.Roles[r.Name]
	if !exists {
		if !own && !slices.Contains(f.ManagedRoles, r.Name) {
			return Step{Kind: Record, Role: r.Name, ManagedUsers: f.ManagedUsers, ManagedRoles: added(f.ManagedRoles, r.Name),
				Reason: "role " + r.Name + " is about to be created"}, true
		}
		return Step{Kind: RoleAdd, Role: r.Name}, true
	}
	for _, p := range r.Permissions {
		if !slices.Contains(have, p) {
			return Step{Kind: RoleGrant, Role: r.Name, Permission: p}, true
		}
	}
	for _, p := range have {
		if !slices.Contains(r.Permissions, p) {
			return Step{Kind: RoleRevoke, Role: r.Name, Permission: p, Reason: "not declared"}, true
		}
	}
	return Step{}, false
}

func syncUsers(f Facts) (Step, bool) {
	waiting := ""
	for _, u := range sortedUsers(f.Users) {
		if u.PasswordMissing != "" {
			continue // reported per user; the others go on
		}
		_, exists := f.Etcd.Users[u.Name]
		if !exists && !f.CRLServed {
			if waiting == "" {
				waiting = "user " + u.Name + " waits until every member serves the certificate revocation list"
			}
			continue
		}
		if !exists && f.OpenSinceRevoke[u.Name] {
			if waiting == "" {
				waiting = "user " + u.Name + " is created again only after every member restarted: a connection opened " +
					"with its revoked certificate would speak as the new user (etcd checks the list when a connection opens)"
			}
			continue
		}
		if s, ok := syncUser(f, u, false); ok {
			return s, true
		}
	}
	if waiting != "" {
		return Step{Kind: Wait, Reason: waiting}, true
	}
	return Step{}, false
}

// syncUser creates one user (intent first for a tenant user), sets its password when the declared
// one differs from the one applied, and brings its roles to the declared ones.
func syncUser(f Facts, u User, own bool) (Step, bool) {
	have, exists := f.Etcd.Users[u.Name]
	if !exists {
		if !own && !slices.Contains(f.ManagedUsers, u.Name) {
			return Step{Kind: Record, User: u.Name, ManagedUsers: added(f.ManagedUsers, u.Name), ManagedRoles: f.ManagedRoles,
				Reason: "user " + u.Name + " is about to be created"}, true
		}
		return Step{Kind: UserAdd, User: u.Name, WithPassword: u.PasswordDigest != ""}, true
	}
	if u.PasswordDigest != "" && f.Passwords[u.Name] != u.PasswordDigest {
		return Step{Kind: UserPassword, User: u.Name, Reason: "its password Secret changed"}, true
	}
	for _, r := range u.Roles {
		if !slices.Contains(have, r) {
			return Step{Kind: UserGrant, User: u.Name, Role: r}, true
		}
	}
	for _, r := range have {
		if !slices.Contains(u.Roles, r) {
			return Step{Kind: UserRevoke, User: u.Name, Role: r, Reason: "not declared"}, true
		}
	}
	return Step{}, false
}

// removeUndeclared deletes what Steward created and the spec no longer declares: a user's
// certificates are revoked before the user goes, and names are forgotten once etcd has none.
func removeUndeclared(f Facts) (Step, bool) {
	declaredUsers := map[string]bool{}
	for _, u := range f.Users {
		declaredUsers[u.Name] = true
	}
	for _, name := range sortedCopy(f.ManagedUsers) {
		if declaredUsers[name] || f.reserved(name) {
			continue
		}
		if _, exists := f.Etcd.Users[name]; exists {
			if !f.Revoked[name] {
				return Step{Kind: RevokeCertificates, User: name, Reason: "user " + name + " is no longer declared"}, true
			}
			return Step{Kind: UserDelete, User: name, Reason: "its certificates are revoked"}, true
		}
		return Step{Kind: Record, User: name, ManagedUsers: removed(f.ManagedUsers, name), ManagedRoles: f.ManagedRoles,
			Reason: "user " + name + " is deleted"}, true
	}
	declaredRoles := map[string]bool{}
	for _, r := range f.Roles {
		declaredRoles[r.Name] = true
	}
	for _, name := range sortedCopy(f.ManagedRoles) {
		if declaredRoles[name] || f.reserved(name) {
			continue
		}
		if _, exists := f.Etcd.Roles[name]; exists {
			return Step{Kind: RoleDelete, Role: name, Reason: "role " + name + " is no longer declared"}, true
		}
		return Step{Kind: Record, Role: name, ManagedUsers: f.ManagedUsers, ManagedRoles: removed(f.ManagedRoles, name),
			Reason: "role " + name + " is deleted"}, true
	}
	return Step{}, false
}

func sortedRoles(rs []Role) []Role {
	c := slices.Clone(rs)
	sort.Slice(c, func(i, j int) bool { return c[i].Name < c[j].Name })
	return c
}

func sortedCopy(s []string) []string { c := slices.Clone(s); slices.Sort(c); return c }

func added(s []string, name string) []string { return sortedCopy(append(slices.Clone(s), name)) }

func removed(s []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(s), func(x string) bool { return x == name })
}

// String is the step as status and the plugin show it.
func (s Step) String() string {
	parts := []string{string(s.Kind)}
	if s.Role != "" {
		parts = append(parts, "role "+s.Role)
	}
	if s.User != "" {
		parts = append(parts, "user "+s.User)
	}
	if s.Permission != (Permission{}) {
		parts = append(parts, fmt.Sprintf("%s %q-%q", s.Permission.Access, s.Permission.Key, s.Permission.RangeEnd))
	}
	if s.Reason != "" {
		parts = append(parts, "("+s.Reason+")")
	}
	return strings.Join(parts, " ")
}
