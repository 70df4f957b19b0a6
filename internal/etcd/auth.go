package etcd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/authpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcd authentication, one step at a time. A controller reads AuthState, compares it with what
// the cluster should have, and applies one of the steps below per change. Every step succeeds
// without doing anything when etcd already is as the step would leave it, so a step repeated
// after a crash (the operator died between etcd applying it and recording it) is harmless.
//
// Steward authenticates to etcd by client certificate: with --client-cert-auth, etcd takes the
// verified certificate's CommonName as the user name, with no password and no token. The
// operator's user must have the root role once auth is on; tenants' users are created with no
// password (UserAdd with ""), so only a certificate with their name gets in.

// Permission types, as AuthPermission.Type spells them.
const (
	PermissionRead      = "read"
	PermissionWrite     = "write"
	PermissionReadWrite = "readwrite"
)

// AuthPermission is one permission of a role: Type on the keys from Key up to RangeEnd (exclusive),
// as etcd means the range: RangeEnd "" is the single key Key, "\x00" every key from Key on, and
// PrefixRangeEnd(p) every key that starts with p (Key p).
type AuthPermission struct {
	Key, RangeEnd string
	Type          string
}

// PrefixRangeEnd is the range end that, with Key prefix, covers every key that starts with prefix
// ("/a/" -> "/a0"); for "" it is "\x00", the whole keyspace.
func PrefixRangeEnd(prefix string) string { return clientv3.GetPrefixRangeEnd(prefix) }

// AuthState is etcd's authentication as it stands: whether it is on, every role with its
// permissions (sorted by key, then range end) and every user with its roles (sorted).
type AuthState struct {
	Enabled bool
	Roles   map[string][]AuthPermission
	Users   map[string][]string
}

func permType(t string) (clientv3.PermissionType, error) {
	switch t {
	case PermissionRead:
		return clientv3.PermissionType(clientv3.PermRead), nil
	case PermissionWrite:
		return clientv3.PermissionType(clientv3.PermWrite), nil
	case PermissionReadWrite:
		return clientv3.PermissionType(clientv3.PermReadWrite), nil
	}
	return 0, fmt.Errorf("unknown permission type %q (want %q, %q or %q)", t, PermissionRead, PermissionWrite, PermissionReadWrite)
}

func permTypeName(t authpb.Permission_Type) string {
	switch t {
	case authpb.Permission_READ:
		return PermissionRead
	case authpb.Permission_WRITE:
		return PermissionWrite
	case authpb.Permission_READWRITE:
		return PermissionReadWrite
	}
	return strings.ToLower(t.String())
}

// AuthEnabled asks whether etcd authentication is on. It never answers false when it cannot tell:
// an error that etcd gives only because auth is on and the caller may not ask is true, any other
// error is returned.
//
// What etcd answers AuthStatus (etcd 3.6.16, measured in TestAuthOnARealEtcd and
// TestAuthEnabledWithoutCredentials, and read in its source): with auth off, anyone. With auth on,
// only a user with the root role: it is one of the requests etcd's apply checks with
// IsAdminPermitted, so a caller without a user name (no client certificate, no token) gets
// ErrUserEmpty, a certificate whose CommonName is no user gets ErrUserNotFound, and a user
// without the root role gets ErrPermissionDenied. etcd 3.7 answers AuthStatus to anyone. An
// invalid token (ErrInvalidAuthToken) is only checked with auth on too. IsAdminPermitted lets
// everything through while auth is off, so none of these can mean off.
func (c *Client) AuthEnabled(ctx context.Context) (bool, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	r, err := c.cluster().AuthStatus(ctx)
	if refusedForAuth(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading auth status: %w", err)
	}
	return r.Enabled, nil
}

// AuthRefused says whether an error of AuthState (wrapped or not) is etcd refusing the caller
// because auth is on and the caller's identity may not read it: no user name, a certificate whose
// CommonName is no user, a user without the root role, an invalid token. For the operator that
// means it is locked out: only a human with root can let it back in. It is no test for the
// steps' errors: there ErrUserNotFound may be the user the step names.
func AuthRefused(err error) bool { return refusedForAuth(err) }

// refusedForAuth: the errors etcd gives only while authentication is on, to a caller that is not
// allowed what it asked.
func refusedForAuth(err error) bool {
	return err != nil && slices.ContainsFunc(authRefusals, func(e error) bool { return errors.Is(err, e) })
}

var authRefusals = []error{rpctypes.ErrUserEmpty, rpctypes.ErrUserNotFound, rpctypes.ErrPermissionDenied, rpctypes.ErrInvalidAuthToken}

// AuthState reads whether auth is on, every role with its permissions and every user with its
// roles. With auth on it needs the root role. The reads are separate requests, not one snapshot:
// a change made meanwhile by someone else shows on the next read.
//
// The root role is etcd's without being added: users may have it while Roles does not list it
// (unless someone added it with RoleAdd, which etcd allows).
func (c *Client) AuthState(ctx context.Context) (AuthState, error) {
	st := AuthState{Roles: map[string][]AuthPermission{}, Users: map[string][]string{}}
	var err error
	if st.Enabled, err = c.AuthEnabled(ctx); err != nil {
		return AuthState{}, err
	}
	auth := c.cluster()
	roles, err := call(ctx, auth.RoleList)
	if err != nil {
		return AuthState{}, fmt.Errorf("listing roles: %w", err)
	}
	for _, role := range roles.Roles {
		r, err := call1(ctx, auth.RoleGet, role)
		if errors.Is(err, rpctypes.ErrRoleNotFound) {
			continue // deleted since the list
		}
		if err != nil {
			return AuthState{}, fmt.Errorf("reading role %s: %w", role, err)
		}
		perms := make([]AuthPermission, 0, len(r.Perm))
		for _, p := range r.Perm {
			perms = append(perms, AuthPermission{Key: string(p.Key), RangeEnd: string(p.RangeEnd), Type: permTypeName(p.PermType)})
		}
		slices.SortFunc(perms, func(a, b AuthPermission) int {
			return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(a.RangeEnd, b.RangeEnd), strings.Compare(a.Type, b.Type))
		})
		st.Roles[role] = perms
	}
	users, err := call(ctx, auth.UserList)
	if err != nil {
		return AuthState{}, fmt.Errorf("listing users: %w", err)
	}
	for _, user := range users.Users {
		u, err := call1(ctx, auth.UserGet, user)
		if errors.Is(err, rpctypes.ErrUserNotFound) {
			continue
		}
		if err != nil {
			return AuthState{}, fmt.Errorf("reading user %s: %w", user, err)
		}
		roles := slices.Clone(u.Roles)
		slices.Sort(roles)
		if roles == nil {
			roles = []string{}
		}
		st.Users[user] = roles
	}
	return st, nil
}

// call and call1 run one etcd call under the per-call timeout.
func call[R any](ctx context.Context, f func(context.Context) (R, error)) (R, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	return f(ctx)
}

func call1[A, R any](ctx context.Context, f func(context.Context, A) (R, error), a A) (R, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	return f(ctx, a)
}

// step runs one auth change under the per-call timeout; done are the errors that mean the change
// is already in place, returned as success; any other error is wrapped with what.
func step(ctx context.Context, what string, f func(context.Context) error, done ...error) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	err := f(ctx)
	if err == nil || slices.ContainsFunc(done, func(d error) bool { return errors.Is(err, d) }) {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// RoleAdd creates a role with no permissions. A role of that name already there is success,
// whatever its permissions: they are AuthState's to read and RoleGrant's and RoleRevoke's to fix.
func (c *Client) RoleAdd(ctx context.Context, name string) error {
	return step(ctx, "adding role "+name, func(ctx context.Context) error {
		_, err := c.cluster().RoleAdd(ctx, name)
		return err
	}, rpctypes.ErrRoleAlreadyExist)
}

// RoleGrant gives a role a permission, or changes the type of the one it has on exactly
// (Key, RangeEnd). The role must exist. A permission already granted as wanted is success with no
// write, so the role is read first; that read is also what keeps etcd from listing a permission
// twice: etcd updates a permission in place only when it is the first of the role's permissions
// on its Key, and otherwise appends another, so granting [/a/, /a0) again to a role that also has
// the single key /a/ would add a duplicate on every retry. When such a grant would not update in
// place, the old permission is revoked first (the role lacks it until the grant that follows).
func (c *Client) RoleGrant(ctx context.Context, role string, p AuthPermission) error {
	what := "granting role " + role + " " + p.describe()
	t, err := permType(p.Type)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if p.Key == "" {
		// etcd refuses it (invalid auth management); the whole keyspace is Key "\x00", RangeEnd "\x00".
		return fmt.Errorf("%s: a permission needs a key", what)
	}
	r, err := call1(ctx, c.cluster().RoleGet, role)
	if err != nil {
		return fmt.Errorf("%s: reading the role: %w", what, err)
	}
	var same, onKey int // permissions on exactly (Key, RangeEnd); on Key
	wanted := false
	for _, q := range r.Perm {
		if string(q.Key) != p.Key {
			continue
		}
		onKey++
		if string(q.RangeEnd) == p.RangeEnd {
			same++
			wanted = permTypeName(q.PermType) == p.Type
		}
	}
	switch {
	case same == 1 && wanted:
		return nil
	case same > 1 || (same == 1 && onKey > 1):
		if err := c.RoleRevoke(ctx, role, p.Key, p.RangeEnd); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return step(ctx, what, func(ctx context.Context) error {
		_, err := c.cluster().RoleGrantPermission(ctx, role, p.Key, p.RangeEnd, t)
		return err
	})
}

func (p AuthPermission) describe() string {
	return fmt.Sprintf("%s on [%q, %q)", p.Type, p.Key, p.RangeEnd)
}

// RoleRevoke takes the permission on exactly (key, rangeEnd) from a role. A permission not
// granted, or a role that does not exist (it has no permission at all), is success.
func (c *Client) RoleRevoke(ctx context.Context, role, key, rangeEnd string) error {
	return step(ctx, fmt.Sprintf("revoking [%q, %q) from role %s", key, rangeEnd, role), func(ctx context.Context) error {
		_, err := c.cluster().RoleRevokePermission(ctx, role, key, rangeEnd)
		return err
	}, rpctypes.ErrPermissionNotGranted, rpctypes.ErrRoleNotFound)
}

// RoleDelete deletes a role; etcd also takes it from every user that had it. A role already gone
// is success.
func (c *Client) RoleDelete(ctx context.Context, name string) error {
	return step(ctx, "deleting role "+name, func(ctx context.Context) error {
		_, err := c.cluster().RoleDelete(ctx, name)
		return err
	}, rpctypes.ErrRoleNotFound)
}

// UserAdd creates a user with no roles. An empty password creates a no-password user, which
// only a client certificate whose CommonName is the user's name authenticates (a password login
// is refused). A user of that name already there is success: etcd shows neither a user's
// password nor whether it has one, so UserAdd cannot tell, and does not change, how the existing
// user authenticates; UserChangePassword sets a password.
func (c *Client) UserAdd(ctx context.Context, name, password string) error {
	return step(ctx, "adding user "+name, func(ctx context.Context) error {
		_, err := c.cluster().UserAddWithOptions(ctx, name, password, &clientv3.UserAddOptions{NoPassword: password == ""})
		return err
	}, rpctypes.ErrUserAlreadyExist)
}

// UserChangePassword sets a user's password; setting the same one again is a no-op for etcd too.
// etcd accepts it for a no-password user and keeps that user without a password (the new one is
// dropped): a user's way of authenticating is fixed when it is added.
func (c *Client) UserChangePassword(ctx context.Context, name, password string) error {
	if password == "" {
		return fmt.Errorf("changing the password of user %s: the new password is empty", name)
	}
	return step(ctx, "changing the password of user "+name, func(ctx context.Context) error {
		_, err := c.cluster().UserChangePassword(ctx, name, password)
		return err
	})
}

// UserGrantRole gives a user a role; etcd ignores a grant the user already has. Both must exist.
func (c *Client) UserGrantRole(ctx context.Context, user, role string) error {
	return step(ctx, "granting role "+role+" to user "+user, func(ctx context.Context) error {
		_, err := c.cluster().UserGrantRole(ctx, user, role)
		return err
	})
}

// UserRevokeRole takes a role from a user. A role the user does not have, or a user that does
// not exist, is success.
func (c *Client) UserRevokeRole(ctx context.Context, user, role string) error {
	return step(ctx, "revoking role "+role+" from user "+user, func(ctx context.Context) error {
		_, err := c.cluster().UserRevokeRole(ctx, user, role)
		return err
	}, rpctypes.ErrRoleNotGranted, rpctypes.ErrUserNotFound)
}

// UserDelete deletes a user. A user already gone is success. Deleting a no-password user does not
// revoke its certificate: a user of the same name created later is that certificate's user again,
// which is what a revocation list (pki.RevocationList) is for.
func (c *Client) UserDelete(ctx context.Context, name string) error {
	return step(ctx, "deleting user "+name, func(ctx context.Context) error {
		_, err := c.cluster().UserDelete(ctx, name)
		return err
	}, rpctypes.ErrUserNotFound)
}

// AuthEnable turns authentication on; etcd refuses while there is no root user with the root role
// (ErrRootUserNotExist, ErrRootRoleNotExist). Already on is success: etcd ignores the request from
// a root user, and refuses it to anyone else with an error it gives only while auth is on.
func (c *Client) AuthEnable(ctx context.Context) error {
	return step(ctx, "enabling authentication", func(ctx context.Context) error {
		_, err := c.cluster().AuthEnable(ctx)
		return err
	}, authRefusals...)
}

// AuthDisable turns authentication off (the caller needs the root role). Already off is success
// (etcd ignores it).
func (c *Client) AuthDisable(ctx context.Context) error {
	return step(ctx, "disabling authentication", func(ctx context.Context) error {
		_, err := c.cluster().AuthDisable(ctx)
		return err
	})
}
