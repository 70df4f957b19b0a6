package authplan

import (
	"slices"
	"strings"
	"testing"
)

// world is etcd's auth store and Steward's status, changed only by the steps Decide returns, the
// way the controller carries them out. It checks after every step that Steward could still get in.
type world struct {
	t        *testing.T
	etcd     Observed
	managed  struct{ users, roles []string }
	revoked  map[string]bool
	pw       map[string]string
	crl      bool
	trace    []string
	repeatEv bool // apply every etcd step twice (a crash before status recorded it)
}

func newWorld(t *testing.T) *world {
	return &world{t: t, etcd: Observed{Roles: map[string][]Permission{}, Users: map[string][]string{}},
		revoked: map[string]bool{}, pw: map[string]string{}}
}

func (w *world) facts(spec Facts) Facts {
	f := spec
	f.Self, f.Declared = self, true
	f.Etcd = with(w.etcd, func(*Observed) {})
	f.ManagedUsers, f.ManagedRoles = slices.Clone(w.managed.users), slices.Clone(w.managed.roles)
	f.Revoked, f.Passwords, f.CRLServed = w.revoked, w.pw, w.crl
	return f
}

// run decides and applies until Nothing (or a Wait it cannot clear), returning the last step.
func (w *world) run(spec Facts) Step {
	for i := 0; i < 100; i++ {
		f := w.facts(spec)
		s := Decide(f)
		w.trace = append(w.trace, string(s.Kind))
		switch s.Kind {
		case Nothing, Refuse:
			return s
		case Wait:
			if strings.Contains(s.Reason, "revocation list") && !w.crl {
				w.crl = true // the controller rolled the flag out
				continue
			}
			return s
		}
		n := 1
		if w.repeatEv {
			n = 2
		}
		for range n {
			w.apply(f, s)
		}
		w.check()
	}
	w.t.Fatalf("no convergence: %v", w.trace)
	return Step{}
}

func (w *world) apply(f Facts, s Step) {
	e := &w.etcd
	switch s.Kind {
	case Record:
		w.managed.users, w.managed.roles = s.ManagedUsers, s.ManagedRoles
	case RevokeCertificates:
		w.revoked[s.User] = true
	case RoleAdd:
		if _, ok := e.Roles[s.Role]; !ok {
			e.Roles[s.Role] = nil
		}
		w.mustOwn(f, s.Role, w.managed.roles)
	case RoleGrant:
		if !slices.Contains(e.Roles[s.Role], s.Permission) {
			e.Roles[s.Role] = append(e.Roles[s.Role], s.Permission)
		}
	case RoleRevoke:
		e.Roles[s.Role] = slices.DeleteFunc(e.Roles[s.Role], func(p Permission) bool { return p == s.Permission })
	case RoleDelete:
		if !slices.Contains(w.managed.roles, s.Role) {
			w.t.Fatalf("deleted role %s Steward did not create", s.Role)
		}
		delete(e.Roles, s.Role)
	case UserAdd:
		if !f.reserved(s.User) && !w.crl {
			w.t.Fatalf("tenant user %s created before the revocation list was served", s.User)
		}
		w.mustOwn(f, s.User, w.managed.users)
		if _, ok := e.Users[s.User]; !ok {
			e.Users[s.User] = nil
		}
		if s.WithPassword {
			w.pw[s.User] = digestOf(f, s.User)
		}
	case UserPassword:
		w.pw[s.User] = digestOf(f, s.User)
	case UserGrant:
		if !slices.Contains(e.Users[s.User], s.Role) {
			e.Users[s.User] = append(e.Users[s.User], s.Role)
		}
	case UserRevoke:
		e.Users[s.User] = slices.DeleteFunc(e.Users[s.User], func(r string) bool { return r == s.Role })
	case UserDelete:
		if !slices.Contains(w.managed.users, s.User) || !w.revoked[s.User] {
			w.t.Fatalf("deleted user %s: managed %v, revoked %v", s.User, w.managed.users, w.revoked[s.User])
		}
		delete(e.Users, s.User)
	case AuthEnable:
		if !slices.Contains(e.Users[RootUser], RootRole) {
			w.t.Fatal("etcd refuses auth enable without a root user")
		}
		e.Enabled = true
	case AuthDisable:
		e.Enabled = false
	}
}

func (w *world) mustOwn(f Facts, name string, managed []string) {
	if !f.reserved(name) && !slices.Contains(managed, name) {
		w.t.Fatalf("created %s before recording it as Steward's", name)
	}
}

// check is the invariant: with auth on, the operator and backups keep root, and the shared client
// keeps everything.
func (w *world) check() {
	if !w.etcd.Enabled {
		return
	}
	for _, u := range []string{RootUser, self.Operator, self.Backup} {
		if !slices.Contains(w.etcd.Users[u], RootRole) {
			w.t.Fatalf("auth on and %s lacks root: %v", u, w.trace)
		}
	}
	if !slices.Contains(w.etcd.Roles[FullAccessRole], FullAccess) || !slices.Contains(w.etcd.Users[self.SharedClient], FullAccessRole) {
		w.t.Fatalf("auth on and the shared client lost full access: %v", w.trace)
	}
}

func digestOf(f Facts, user string) string {
	for _, u := range f.Users {
		if u.Name == user {
			return u.PasswordDigest
		}
	}
	return ""
}

func tenantSpec(users ...User) Facts {
	return Facts{Enabled: true, Roles: []Role{{Name: "tenant-a", Permissions: []Permission{tenantA}}}, Users: users}
}

func TestSequences(t *testing.T) {
	appA := User{Name: "app-a", Roles: []string{"tenant-a"}}
	t.Run("enable on a fresh cluster with a tenant", func(t *testing.T) {
		w := newWorld(t)
		if s := w.run(tenantSpec(appA)); s.Kind != Nothing {
			t.Fatalf("ended on %s", s)
		}
		want := "RoleAdd RoleGrant UserAdd UserGrant UserAdd UserGrant UserAdd UserGrant UserAdd UserGrant " +
			"Record RoleAdd RoleGrant Wait Record UserAdd UserGrant AuthEnable Nothing"
		if got := strings.Join(w.trace, " "); got != want {
			t.Errorf("steps\n got %s\nwant %s", got, want)
		}
		if !w.etcd.Enabled || !slices.Equal(w.etcd.Users["app-a"], []string{"tenant-a"}) {
			t.Errorf("end state %+v", w.etcd)
		}
	})
	t.Run("every etcd step repeated (a crash before status) ends the same", func(t *testing.T) {
		w := newWorld(t)
		w.repeatEv = true
		w.run(tenantSpec(appA))
		if !w.etcd.Enabled || len(w.etcd.Users) != 5 || len(w.etcd.Roles) != 2 {
			t.Errorf("end state %+v", w.etcd)
		}
	})
	t.Run("a tenant removed: revoked, deleted, forgotten; the role too", func(t *testing.T) {
		w := newWorld(t)
		w.run(tenantSpec(appA))
		w.trace = nil
		w.run(Facts{Enabled: true})
		if got, want := strings.Join(w.trace, " "), "RevokeCertificates UserDelete Record RoleDelete Record Nothing"; got != want {
			t.Errorf("steps\n got %s\nwant %s", got, want)
		}
		if len(w.managed.users)+len(w.managed.roles) != 0 || !w.revoked["app-a"] {
			t.Errorf("status: managed %+v revoked %v", w.managed, w.revoked)
		}
		if _, ok := w.etcd.Users[self.SharedClient]; !ok {
			t.Error("Steward's own users must stay")
		}
	})
	t.Run("a role that existed before Steward is synced but never deleted", func(t *testing.T) {
		w := newWorld(t)
		w.etcd.Roles["tenant-a"] = []Permission{{Key: "/old/", Access: Read}}
		w.run(tenantSpec())
		if !slices.Equal(w.etcd.Roles["tenant-a"], []Permission{tenantA}) {
			t.Errorf("permissions %v", w.etcd.Roles["tenant-a"])
		}
		w.run(Facts{Enabled: true})
		if _, ok := w.etcd.Roles["tenant-a"]; !ok {
			t.Error("a role Steward did not create was deleted")
		}
	})
	t.Run("password rotation, then disable keeps everything but auth", func(t *testing.T) {
		w := newWorld(t)
		u := appA
		u.PasswordDigest = "d1"
		w.run(tenantSpec(u))
		u.PasswordDigest = "d2"
		w.trace = nil
		w.run(tenantSpec(u))
		if got := strings.Join(w.trace, " "); got != "UserPassword Nothing" || w.pw["app-a"] != "d2" {
			t.Errorf("steps %s, password %s", got, w.pw["app-a"])
		}
		off := tenantSpec(u)
		off.Enabled = false
		w.run(off)
		if w.etcd.Enabled || len(w.etcd.Users) != 5 {
			t.Errorf("after disable %+v", w.etcd)
		}
	})
	t.Run("an operator user lost while auth is on is restored first", func(t *testing.T) {
		w := newWorld(t)
		w.run(tenantSpec(appA))
		w.etcd.Users[self.Backup] = nil // someone revoked root from the backup identity
		w.trace = nil
		w.run(tenantSpec(appA))
		if got := strings.Join(w.trace, " "); got != "UserGrant Nothing" {
			t.Errorf("steps %s", got)
		}
	})
}
