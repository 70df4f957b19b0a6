package authplan

import (
	"errors"
	"strings"
	"testing"
)

var self = Identity{Operator: "steward-operator", Backup: "steward-backup", SharedClient: "demo-client"}

var tenantA = Permission{Key: "/a/", RangeEnd: "/a0", Access: ReadWrite}

// ready is etcd with Steward's own access in place and auth off.
func ready() Observed {
	return Observed{
		Roles: map[string][]Permission{FullAccessRole: {FullAccess}},
		Users: map[string][]string{
			RootUser: {RootRole}, "steward-operator": {RootRole}, "steward-backup": {RootRole}, "demo-client": {FullAccessRole},
		},
	}
}

func with(o Observed, edit func(*Observed)) Observed {
	c := Observed{Enabled: o.Enabled, Roles: map[string][]Permission{}, Users: map[string][]string{}, Err: o.Err, LockedOut: o.LockedOut}
	for k, v := range o.Roles {
		c.Roles[k] = append([]Permission(nil), v...)
	}
	for k, v := range o.Users {
		c.Users[k] = append([]string(nil), v...)
	}
	edit(&c)
	return c
}

func facts(edit func(*Facts)) Facts {
	f := Facts{Declared: true, Enabled: true, Self: self, Etcd: ready(), CRLServed: true}
	if edit != nil {
		edit(&f)
	}
	return f
}

func TestDecide(t *testing.T) {
	tenant := func(f *Facts) {
		f.Roles = []Role{{Name: "tenant-a", Permissions: []Permission{tenantA}}}
		f.Users = []User{{Name: "app-a", Roles: []string{"tenant-a"}}}
	}
	cases := []struct {
		name string
		f    Facts
		want Step
	}{
		{"no spec.auth: nothing, even with etcd auth on",
			Facts{Etcd: Observed{Enabled: true}}, Step{Kind: Nothing, Reason: "spec.auth is not set"}},
		{"etcd unreadable: wait, decide nothing from a guess",
			facts(func(f *Facts) { f.Etcd = Observed{Err: errors.New("context deadline exceeded")} }),
			Step{Kind: Wait, Reason: "reading etcd's auth state: context deadline exceeded"}},
		{"locked out: refuse and say what root must run",
			facts(func(f *Facts) {
				f.Etcd = Observed{Enabled: true, LockedOut: true, Err: errors.New("permission denied")}
			}),
			Step{Kind: Refuse, Reason: LockoutHelp(self)}},
		{"fresh etcd: the full-access role first",
			facts(func(f *Facts) { f.Etcd = Observed{} }),
			Step{Kind: RoleAdd, Role: FullAccessRole}},
		{"full-access role without its permission: grant it",
			facts(func(f *Facts) { f.Etcd = with(ready(), func(o *Observed) { o.Roles[FullAccessRole] = nil }) }),
			Step{Kind: RoleGrant, Role: FullAccessRole, Permission: FullAccess}},
		{"root user before the operator's",
			facts(func(f *Facts) {
				f.Etcd = with(ready(), func(o *Observed) { delete(o.Users, RootUser); delete(o.Users, "steward-operator") })
			}),
			Step{Kind: UserAdd, User: RootUser}},
		{"operator user without root: grant it",
			facts(func(f *Facts) { f.Etcd = with(ready(), func(o *Observed) { o.Users["steward-operator"] = nil }) }),
			Step{Kind: UserGrant, User: "steward-operator", Role: RootRole}},
		{"shared client user created without recording (Steward's own, never deleted)",
			facts(func(f *Facts) { f.Etcd = with(ready(), func(o *Observed) { delete(o.Users, "demo-client") }) }),
			Step{Kind: UserAdd, User: "demo-client"}},
		{"own access in place, nothing declared: auth on",
			facts(nil), Step{Kind: AuthEnable, Reason: "Steward's own users, the declared roles and users are in place"}},
		{"auth on and in sync: nothing",
			facts(func(f *Facts) { f.Etcd.Enabled = true }), Step{Kind: Nothing}},
		{"a declared role: its name recorded before it is created",
			facts(tenant),
			Step{Kind: Record, Role: "tenant-a", ManagedRoles: []string{"tenant-a"}, Reason: "role tenant-a is about to be created"}},
		{"a recorded role: created",
			facts(func(f *Facts) { tenant(f); f.ManagedRoles = []string{"tenant-a"} }),
			Step{Kind: RoleAdd, Role: "tenant-a"}},
		{"a role's declared permission missing: granted",
			facts(func(f *Facts) {
				tenant(f)
				f.ManagedRoles = []string{"tenant-a"}
				f.Etcd.Roles["tenant-a"] = nil
			}),
			Step{Kind: RoleGrant, Role: "tenant-a", Permission: tenantA}},
		{"a role's undeclared permission: revoked",
			facts(func(f *Facts) {
				tenant(f)
				f.Etcd.Roles["tenant-a"] = []Permission{tenantA, {Key: "/b/", RangeEnd: "/b0", Access: Read}}
			}),
			Step{Kind: RoleRevoke, Role: "tenant-a", Permission: Permission{Key: "/b/", RangeEnd: "/b0", Access: Read}, Reason: "not declared"}},
		{"a tenant user waits for the revocation list",
			facts(func(f *Facts) {
				tenant(f)
				f.CRLServed = false
				f.Etcd.Roles["tenant-a"] = []Permission{tenantA}
			}),
			Step{Kind: Wait, Reason: "user app-a waits until every member serves the certificate revocation list"}},
		{"a name revoked while members kept connections open: waits for their restart",
			facts(func(f *Facts) {
				tenant(f)
				f.Etcd.Roles["tenant-a"] = []Permission{tenantA}
				f.OpenSinceRevoke = map[string]bool{"app-a": true}
			}),
			Step{Kind: Wait, Reason: "user app-a is created again only after every member restarted: a connection opened " +
				"with its revoked certificate would speak as the new user (etcd checks the list when a connection opens)"}},
		{"a tenant user: recorded, then created",
			facts(func(f *Facts) { tenant(f); f.Etcd.Roles["tenant-a"] = []Permission{tenantA} }),
			Step{Kind: Record, User: "app-a", ManagedUsers: []string{"app-a"}, Reason: "user app-a is about to be created"}},
		{"a recorded tenant user with a password",
			facts(func(f *Facts) {
				tenant(f)
				f.Users[0].PasswordDigest = "d1"
				f.ManagedUsers = []string{"app-a"}
				f.Etcd.Roles["tenant-a"] = []Permission{tenantA}
			}),
			Step{Kind: UserAdd, User: "app-a", WithPassword: true}},
		{"a password Secret changed: the password follows",
			facts(func(f *Facts) {
				tenant(f)
				f.Users[0].PasswordDigest = "d2"
				f.Passwords = map[string]string{"app-a": "d1"}
				f.Etcd.Roles["tenant-a"] = []Permission{tenantA}
				f.Etcd.Users["app-a"] = []string{"tenant-a"}
			}),
			Step{Kind: UserPassword, User: "app-a", Reason: "its password Secret changed"}},
		{"a missing password Secret holds that user only: auth still goes on",
			facts(func(f *Facts) {
				tenant(f)
				f.Users[0].PasswordMissing = "Secret app-a-password not found"
				f.Etcd.Roles["tenant-a"] = []Permission{tenantA}
			}),
			Step{Kind: AuthEnable, Reason: "Steward's own users, the declared roles and users are in place"}},
		{"a user's declared role missing: granted",
			facts(func(f *Facts) {
				tenant(f)
				f.Etcd.Roles["tenant-a"] = []Permission{tenantA}
				f.Etcd.Users["app-a"] = nil
			}),
			Step{Kind: UserGrant, User: "app-a", Role: "tenant-a"}},
		{"a user's undeclared role: revoked",
			facts(func(f *Facts) {
				tenant(f)
				f.Etcd.Roles["tenant-a"] = []Permission{tenantA}
				f.Etcd.Users["app-a"] = []string{"tenant-a", RootRole}
			}),
			Step{Kind: UserRevoke, User: "app-a", Role: RootRole, Reason: "not declared"}},
		{"spec disables auth: off before anything else",
			facts(func(f *Facts) { f.Enabled = false; f.Etcd = Observed{Enabled: true} }),
			Step{Kind: AuthDisable, Reason: "spec.auth.enabled is false"}},
		{"a managed user no longer declared: certificates revoked first",
			facts(func(f *Facts) {
				f.Etcd.Enabled = true
				f.ManagedUsers = []string{"app-a"}
				f.Etcd.Users["app-a"] = []string{"tenant-a"}
			}),
			Step{Kind: RevokeCertificates, User: "app-a", Reason: "user app-a is no longer declared"}},
		{"its certificates revoked: deleted",
			facts(func(f *Facts) {
				f.Etcd.Enabled = true
				f.ManagedUsers = []string{"app-a"}
				f.Revoked = map[string]bool{"app-a": true}
				f.Etcd.Users["app-a"] = []string{"tenant-a"}
			}),
			Step{Kind: UserDelete, User: "app-a", Reason: "its certificates are revoked"}},
		{"deleted: forgotten",
			facts(func(f *Facts) { f.Etcd.Enabled = true; f.ManagedUsers = []string{"app-a", "app-b"} }),
			Step{Kind: Record, User: "app-a", ManagedUsers: []string{"app-b"}, Reason: "user app-a is deleted"}},
		{"a user Steward did not create is never deleted",
			facts(func(f *Facts) { f.Etcd.Enabled = true; f.Etcd.Users["someone"] = []string{RootRole} }),
			Step{Kind: Nothing}},
		{"a managed role no longer declared: deleted, then forgotten",
			facts(func(f *Facts) {
				f.Etcd.Enabled = true
				f.ManagedRoles = []string{"tenant-a"}
				f.Etcd.Roles["tenant-a"] = []Permission{tenantA}
			}),
			Step{Kind: RoleDelete, Role: "tenant-a", Reason: "role tenant-a is no longer declared"}},
		{"a reserved user name in the spec: refused",
			facts(func(f *Facts) { f.Users = []User{{Name: "steward-operator"}} }),
			Step{Kind: Refuse, User: "steward-operator", Reason: `user "steward-operator" is Steward's own; choose another name`}},
		{"the shared client's name in the spec: refused",
			facts(func(f *Facts) { f.Users = []User{{Name: "demo-client"}} }),
			Step{Kind: Refuse, User: "demo-client", Reason: `user "demo-client" is Steward's own; choose another name`}},
		{"a reserved role name: refused",
			facts(func(f *Facts) { f.Roles = []Role{{Name: RootRole}} }),
			Step{Kind: Refuse, Role: RootRole, Reason: `role "root" is Steward's own; choose another name`}},
		{"an undeclared role on a user: refused",
			facts(func(f *Facts) { f.Users = []User{{Name: "app", Roles: []string{"nope"}}} }),
			Step{Kind: Refuse, User: "app", Role: "nope", Reason: `user "app" has role "nope", which spec.auth.roles does not declare`}},
		{"root is a role a tenant user may have",
			facts(func(f *Facts) {
				f.Users = []User{{Name: "admin", Roles: []string{RootRole}}}
				f.ManagedUsers = []string{"admin"}
			}),
			Step{Kind: UserAdd, User: "admin"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Decide(c.f)
			if got.String() != c.want.String() || strings.Join(got.ManagedUsers, ",") != strings.Join(c.want.ManagedUsers, ",") ||
				strings.Join(got.ManagedRoles, ",") != strings.Join(c.want.ManagedRoles, ",") || got.WithPassword != c.want.WithPassword {
				t.Errorf("got  %s (users %v roles %v password %v)\nwant %s (users %v roles %v password %v)",
					got, got.ManagedUsers, got.ManagedRoles, got.WithPassword, c.want, c.want.ManagedUsers, c.want.ManagedRoles, c.want.WithPassword)
			}
		})
	}
}

func TestPhaseAndUsers(t *testing.T) {
	f := facts(func(f *Facts) {
		f.Roles = []Role{{Name: "tenant-a", Permissions: []Permission{tenantA}}}
		f.Users = []User{
			{Name: "c", Roles: []string{"tenant-a"}},
			{Name: "b", Roles: []string{"tenant-a"}, PasswordMissing: "Secret b-password not found"},
			{Name: "a", Roles: []string{"tenant-a"}, PasswordDigest: "d2"},
			{Name: "d", Roles: []string{"tenant-a"}},
		}
		f.Passwords = map[string]string{"a": "d1"}
		f.Etcd.Roles["tenant-a"] = []Permission{tenantA}
		f.Etcd.Users["a"] = []string{"tenant-a"}
		f.Etcd.Users["d"] = []string{"tenant-a"}
	})
	got := Users(f)
	want := []UserState{
		{"a", "Pending", "password not applied yet"},
		{"b", "WaitingForPassword", "Secret b-password not found"},
		{"c", "Pending", "not created yet"},
		{"d", "Ready", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("user %d: got %+v, want %+v", i, got[i], want[i])
		}
	}

	phases := []struct {
		name string
		f    Facts
		want Phase
	}{
		{"undeclared", Facts{}, Off},
		{"undeclared, etcd on (a restored backup)", Facts{Etcd: Observed{Enabled: true}}, Undeclared},
		{"undeclared, etcd unreadable", Facts{Etcd: Observed{Err: errors.New("x")}}, Off},
		{"declared off, etcd off", facts(func(f *Facts) { f.Enabled = false }), Off},
		{"enabling", facts(nil), Enabling},
		{"on", facts(func(f *Facts) { f.Etcd.Enabled = true }), On},
		{"on, a user pending", facts(func(f *Facts) {
			f.Etcd.Enabled = true
			f.Users = []User{{Name: "x"}}
		}), Syncing},
		{"disabling", facts(func(f *Facts) { f.Enabled = false; f.Etcd.Enabled = true }), Disabling},
		{"unreadable", facts(func(f *Facts) { f.Etcd.Err = errors.New("x") }), Unknown},
		{"refused", facts(func(f *Facts) { f.Users = []User{{Name: RootUser}} }), Refused},
	}
	for _, p := range phases {
		if got := PhaseOf(p.f, Decide(p.f)); got != p.want {
			t.Errorf("%s: phase %s, want %s", p.name, got, p.want)
		}
	}
	// Only root may compact (etcd's kvServer.Compact): with auth on, history is compacted only by
	// etcd's own auto-compaction or a root client, so status says so while none is set.
	for _, m := range []struct {
		name string
		f    Facts
		want string
	}{
		{"on without auto-compaction", facts(func(f *Facts) { f.Etcd.Enabled = true }), CompactionHint},
		{"on with auto-compaction", facts(func(f *Facts) { f.Etcd.Enabled = true; f.AutoCompaction = true }), ""},
		{"enabling: the step, not the hint", facts(nil), Decide(facts(nil)).String()},
		{"off: no hint", facts(func(f *Facts) { f.Enabled = false }), ""},
		{"undeclared: its own help", Facts{Etcd: Observed{Enabled: true}}, UndeclaredHelp(Identity{})},
		{"refused: the reason", facts(func(f *Facts) { f.Users = []User{{Name: RootUser}} }), "Refuse"},
	} {
		if got := Message(m.f, Decide(m.f)); got != m.want && (m.want == "" || !strings.HasPrefix(got, m.want)) {
			t.Errorf("%s: message %q, want %q", m.name, got, m.want)
		}
	}
	// Auth found on without spec.auth: Steward changes nothing about it.
	if s := Decide(Facts{Etcd: Observed{Enabled: true}}); s.Kind != Nothing {
		t.Errorf("undeclared with etcd on: step %v, want nothing", s)
	}
}
