package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-steward/steward/internal/etcdtest"
	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/internal/resources"
)

// authMember is one real etcd member serving mutual TLS, with a revocation list from the start.
type authMember struct {
	t   *testing.T
	url string
	dir string
	ca  *pki.CA
}

func startAuthMember(t *testing.T) *authMember {
	t.Helper()
	bin, err := etcdtest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca, err := pki.NewCA("etcd", "db", now.Add(-time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.IssueServer(pki.MemberNames{Cluster: "etcd", Namespace: "db", Member: "etcd-0"}, now.Add(-time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	m, err := server.Material(ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	am := &authMember{t: t, dir: t.TempDir(), ca: ca}
	for name, data := range map[string][]byte{"server.crt": m.Cert, "server.key": m.Key, "ca.crt": m.CA} {
		am.write(name, data)
	}
	// etcd refuses every client while its --client-crl-file cannot be read or parsed, so a member
	// starts with an empty list, as a member Steward runs would.
	am.revoke(1)
	am.url = etcdtest.StartTLS(t, bin, am.dir, "--client-crl-file="+filepath.Join(am.dir, resources.KeyCRL))
	return am
}

// write swaps a file in whole, as the kubelet swaps a Secret volume.
func (am *authMember) write(name string, data []byte) {
	am.t.Helper()
	if err := os.WriteFile(filepath.Join(am.dir, name+".tmp"), data, 0o600); err != nil {
		am.t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(am.dir, name+".tmp"), filepath.Join(am.dir, name)); err != nil {
		am.t.Fatal(err)
	}
}

// revoke writes a revocation list of the given certificates.
func (am *authMember) revoke(number int64, certs ...*x509.Certificate) {
	am.t.Helper()
	var revoked []pki.RevokedSerial
	for _, c := range certs {
		revoked = append(revoked, pki.RevokedSerial{Serial: c.SerialNumber})
	}
	der, err := am.ca.RevocationList(revoked, number, time.Now(), time.Hour)
	if err != nil {
		am.t.Fatal(err)
	}
	am.write(resources.KeyCRL, der)
}

// client connects with a fresh client certificate whose CommonName is cn (etcd's user name).
func (am *authMember) client(cn string) (*Client, *pki.Leaf) {
	am.t.Helper()
	leaf := freshLeaf(am, cn)
	return am.clientWith(leaf), leaf
}

func (am *authMember) clientWith(leaf *pki.Leaf) *Client {
	am.t.Helper()
	creds := &Credentials{}
	creds.Set([]*x509.Certificate{am.ca.Cert}, []tls.Certificate{{Certificate: [][]byte{leaf.Cert.Raw}, PrivateKey: leaf.Key, Leaf: leaf.Cert}})
	c, err := New([]string{am.url}, creds)
	if err != nil {
		am.t.Fatal(err)
	}
	am.t.Cleanup(func() { _ = c.Close() })
	return c
}

// twice applies a step twice: the second must succeed too, without changing anything.
func twice(t *testing.T, what string, f func() error) {
	t.Helper()
	for i := range 2 {
		if err := f(); err != nil {
			t.Fatalf("%s (attempt %d): %v", what, i+1, err)
		}
	}
}

func shortCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The steps a controller takes to turn etcd authentication on for an operator that
// authenticates by client certificate and a tenant confined to its prefix, each applied twice;
// then what the operator, the tenant and a stranger can do; then a tenant whose certificate is
// revoked and whose user is re-created; then auth off again.
func TestAuthOnARealEtcd(t *testing.T) {
	start := time.Now()
	am := startAuthMember(t)
	ctx := tctx(t)
	op, _ := am.client("steward-operator")

	if on, err := op.AuthEnabled(ctx); err != nil || on {
		t.Fatalf("AuthEnabled on a fresh member: %v, %v; want false", on, err)
	}
	if err := op.AuthEnable(ctx); !errors.Is(err, rpctypes.ErrRootUserNotExist) {
		t.Fatalf("AuthEnable without a root user: %v, want etcd's refusal (root user does not exist)", err)
	}

	tenantPerm := AuthPermission{Key: "/a/", RangeEnd: PrefixRangeEnd("/a/"), Type: PermissionReadWrite}
	twice(t, "adding user steward-operator", func() error { return op.UserAdd(ctx, "steward-operator", "") })
	twice(t, "granting root to steward-operator", func() error { return op.UserGrantRole(ctx, "steward-operator", "root") })
	twice(t, "adding user root", func() error { return op.UserAdd(ctx, "root", "first password") })
	twice(t, "changing root's password", func() error { return op.UserChangePassword(ctx, "root", "second password") })
	twice(t, "granting root to root", func() error { return op.UserGrantRole(ctx, "root", "root") })
	twice(t, "adding role tenant-a", func() error { return op.RoleAdd(ctx, "tenant-a") })
	twice(t, "granting /a/ to tenant-a", func() error { return op.RoleGrant(ctx, "tenant-a", tenantPerm) })
	twice(t, "adding user tenant-a", func() error { return op.UserAdd(ctx, "tenant-a", "") })
	twice(t, "granting tenant-a to tenant-a", func() error { return op.UserGrantRole(ctx, "tenant-a", "tenant-a") })

	// What is not there is not an error to take away, and what cannot be done is.
	for what, err := range map[string]error{
		"revoking a permission never granted": op.RoleRevoke(ctx, "tenant-a", "/b/", PrefixRangeEnd("/b/")),
		"revoking from a missing role":        op.RoleRevoke(ctx, "no-such-role", "/b/", ""),
		"revoking a role never granted":       op.UserRevokeRole(ctx, "tenant-a", "no-such-role"),
		"revoking a role of a missing user":   op.UserRevokeRole(ctx, "no-such-user", "tenant-a"),
		"deleting a missing user":             op.UserDelete(ctx, "no-such-user"),
		"deleting a missing role":             op.RoleDelete(ctx, "no-such-role"),
	} {
		if err != nil {
			t.Errorf("%s: %v, want success", what, err)
		}
	}
	for what, tc := range map[string]struct {
		err  error
		want error
	}{
		"granting a permission to a missing role": {op.RoleGrant(ctx, "no-such-role", tenantPerm), rpctypes.ErrRoleNotFound},
		"granting a missing role":                 {op.UserGrantRole(ctx, "tenant-a", "no-such-role"), rpctypes.ErrRoleNotFound},
		"granting a role to a missing user":       {op.UserGrantRole(ctx, "no-such-user", "tenant-a"), rpctypes.ErrUserNotFound},
		"changing a missing user's password":      {op.UserChangePassword(ctx, "no-such-user", "x"), rpctypes.ErrUserNotFound},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", what, tc.err, tc.want)
		}
	}
	if err := op.RoleGrant(ctx, "tenant-a", AuthPermission{Key: "/a/", Type: "everything"}); err == nil {
		t.Error("an unknown permission type was granted")
	}

	testRoleGrantKeepsOnePermission(t, op)

	twice(t, "enabling auth", func() error { return op.AuthEnable(ctx) })
	t.Logf("auth on after %v", time.Since(start).Round(time.Millisecond))

	// The operator, root by its certificate, still does its work.
	if members, _, err := op.MemberList(ctx); err != nil || len(members) != 1 {
		t.Fatalf("member list with auth on: %v, %v", members, err)
	}
	if err := op.Defragment(ctx, am.url); err != nil {
		t.Fatalf("defragment with auth on: %v", err)
	}
	if on, err := op.AuthEnabled(ctx); err != nil || !on {
		t.Fatalf("AuthEnabled: %v, %v; want true", on, err)
	}
	st, err := op.AuthState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := AuthState{Enabled: true,
		// The root role needs no adding: etcd knows it without storing it, so it is no role of
		// the list while users have it.
		Roles: map[string][]AuthPermission{"tenant-a": {tenantPerm}},
		Users: map[string][]string{"steward-operator": {"root"}, "root": {"root"}, "tenant-a": {"tenant-a"}},
	}
	if !reflect.DeepEqual(st, want) {
		t.Fatalf("auth state\n got %+v\nwant %+v", st, want)
	}

	// The tenant reaches its prefix and nothing else.
	tenant, tenantLeaf := am.client("tenant-a")
	kv := tenant.cluster()
	if _, err := kv.Put(ctx, "/a/x", "1"); err != nil {
		t.Fatalf("tenant-a writing /a/x: %v", err)
	}
	if r, err := kv.Get(ctx, "/a/x"); err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "1" {
		t.Fatalf("tenant-a reading /a/x: %v, %v", r, err)
	}
	if _, err := kv.Put(ctx, "/b/x", "1"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("tenant-a writing /b/x: %v, want permission denied", err)
	}
	if _, err := kv.Get(ctx, "/b/x"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("tenant-a reading /b/x: %v, want permission denied", err)
	}
	if _, err := tenant.AuthState(ctx); !errors.Is(err, rpctypes.ErrPermissionDenied) || !AuthRefused(err) {
		t.Errorf("tenant-a reading the auth state: %v, want permission denied", err)
	}

	// A certificate of the cluster's CA whose CommonName is no user gets nothing, but is told
	// that auth is on: AuthStatus answers any caller.
	stranger, _ := am.client("stranger")
	if _, err := stranger.cluster().Put(ctx, "/a/x", "2"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("a certificate with no user writing /a/x: %v, want permission denied", err)
	}
	if _, err := stranger.cluster().Get(ctx, "/a/x"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("a certificate with no user reading /a/x: %v, want permission denied", err)
	}
	// The member list asks only for a user name, not a user: any certificate of the CA lists it.
	if _, _, err := stranger.MemberList(ctx); err != nil {
		t.Errorf("a certificate with no user listing the members: %v (etcd 3.6 lets any name list them)", err)
	}
	if _, err := stranger.AuthState(ctx); !errors.Is(err, rpctypes.ErrUserNotFound) || !AuthRefused(err) {
		t.Errorf("a certificate with no user reading the auth state: %v, want user not found", err)
	}
	// etcd 3.6 answers AuthStatus only to root while auth is on (3.7 answers anyone); whatever
	// it says, AuthEnabled reads it as on.
	if r, err := stranger.cluster().AuthStatus(ctx); !errors.Is(err, rpctypes.ErrUserNotFound) && (err != nil || !r.Enabled) {
		t.Errorf("AuthStatus for a certificate with no user: %v, %v; want user not found (3.6) or enabled (3.7)", r, err)
	}
	if r, err := tenant.cluster().AuthStatus(ctx); !errors.Is(err, rpctypes.ErrPermissionDenied) && (err != nil || !r.Enabled) {
		t.Errorf("AuthStatus for a user without root: %v, %v; want permission denied (3.6) or enabled (3.7)", r, err)
	}
	for who, c := range map[string]*Client{"a certificate with no user": stranger, "a user without root": tenant} {
		if on, err := c.AuthEnabled(ctx); err != nil || !on {
			t.Errorf("AuthEnabled for %s: %v, %v; want true", who, on, err)
		}
		if err := c.AuthEnable(ctx); err != nil {
			t.Errorf("AuthEnable, already on, for %s: %v; want success", who, err)
		}
		if err := c.AuthDisable(ctx); err == nil {
			t.Errorf("%s turned auth off", who)
		}
	}

	// Passwords: root logs in with the one it was changed to; a no-password user takes none.
	if _, err := op.cluster().Authenticate(ctx, "root", "second password"); err != nil {
		t.Errorf("root logging in with its changed password: %v", err)
	}
	if _, err := op.cluster().Authenticate(ctx, "root", "first password"); !errors.Is(err, rpctypes.ErrAuthFailed) {
		t.Errorf("root logging in with its first password: %v, want authentication failed", err)
	}
	if err := op.UserChangePassword(ctx, "tenant-a", "a password"); err != nil {
		t.Errorf("changing a no-password user's password: %v", err)
	}
	if _, err := op.cluster().Authenticate(ctx, "tenant-a", "a password"); err == nil {
		t.Error("a no-password user logged in with the password it was given")
	}

	// A revocation list in PEM is one etcd cannot parse, and then it lets nobody in.
	der, err := os.ReadFile(filepath.Join(am.dir, resources.KeyCRL))
	if err != nil {
		t.Fatal(err)
	}
	am.write(resources.KeyCRL, pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}))
	if err := handshake(am, freshLeaf(am, "steward-operator")); err == nil {
		t.Error("etcd let a client in while its revocation list was PEM")
	}
	am.write(resources.KeyCRL, der)
	if err := handshake(am, freshLeaf(am, "steward-operator")); err != nil {
		t.Fatalf("the DER list back: %v", err)
	}

	// Revocation: the tenant goes and comes back with a new certificate. A user re-created under
	// the same name would let the old certificate in again; the revocation list keeps it out.
	// etcd reads the list on every handshake, so no restart is needed.
	am.revoke(2, tenantLeaf.Cert)
	twice(t, "deleting user tenant-a", func() error { return op.UserDelete(ctx, "tenant-a") })
	if _, err := kv.Get(ctx, "/a/x"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("the deleted tenant's open connection reading /a/x: %v, want permission denied", err)
	}
	twice(t, "re-adding user tenant-a", func() error { return op.UserAdd(ctx, "tenant-a", "") })
	twice(t, "granting tenant-a to tenant-a again", func() error { return op.UserGrantRole(ctx, "tenant-a", "tenant-a") })

	if err := handshake(am, tenantLeaf); err == nil {
		t.Error("the revoked certificate completed a connection")
	} else {
		t.Logf("revoked certificate, new connection: %v", err)
	}
	revoked := am.clientWith(tenantLeaf)
	if _, err := revoked.cluster().Get(shortCtx(t), "/a/x"); err == nil || errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("the revoked certificate reading /a/x: %v, want the connection refused", err)
	}
	fresh, freshTenant := am.client("tenant-a")
	if err := handshake(am, freshTenant); err != nil {
		t.Errorf("a fresh tenant-a certificate: %v", err)
	}
	if r, err := fresh.cluster().Get(ctx, "/a/x"); err != nil || len(r.Kvs) != 1 {
		t.Errorf("a fresh tenant-a certificate reading /a/x: %v, %v", r, err)
	}
	// etcd checks the list at the handshake only: a connection opened before the revocation stays
	// open and is the re-created user's. Cutting it takes a member restart.
	if _, err := kv.Get(ctx, "/a/x"); err != nil {
		t.Logf("the revoked certificate's connection from before the revocation was cut: %v", err)
	} else {
		t.Log("the revoked certificate's connection from before the revocation still serves the re-created user")
	}

	twice(t, "disabling auth", func() error { return op.AuthDisable(ctx) })
	if st, err := op.AuthState(ctx); err != nil || st.Enabled {
		t.Fatalf("auth state after disabling: %+v, %v; want enabled false", st, err)
	}
	if _, err := stranger.cluster().Put(ctx, "/b/x", "1"); err != nil {
		t.Errorf("with auth off, anyone with a certificate writes: %v", err)
	}
	t.Logf("done after %v", time.Since(start).Round(time.Millisecond))
}

// etcd updates a permission in place only when it is the first of the role's permissions on its
// key: granting [/q/, /q0) again to a role that also has the single key /q/ appends a duplicate.
// RoleGrant keeps one permission per (Key, RangeEnd), changing its type when asked.
func testRoleGrantKeepsOnePermission(t *testing.T, op *Client) {
	ctx := tctx(t)
	single := AuthPermission{Key: "/q/", Type: PermissionRead}
	prefix := AuthPermission{Key: "/q/", RangeEnd: PrefixRangeEnd("/q/"), Type: PermissionRead}
	twice(t, "adding role quirk", func() error { return op.RoleAdd(ctx, "quirk") })
	raw := func() int {
		t.Helper()
		if _, err := op.cluster().RoleGrantPermission(ctx, "quirk", prefix.Key, prefix.RangeEnd, clientv3.PermissionType(clientv3.PermRead)); err != nil {
			t.Fatal(err)
		}
		r, err := op.cluster().RoleGet(ctx, "quirk")
		if err != nil {
			t.Fatal(err)
		}
		return len(r.Perm)
	}
	twice(t, "granting the single key", func() error { return op.RoleGrant(ctx, "quirk", single) })
	raw()
	if n := raw(); n != 2 {
		t.Logf("etcd's own grant of the prefix, repeated, left %d permissions where 2 are granted: it appended a duplicate", n)
	}
	for _, p := range []AuthPermission{prefix, prefix, {Key: "/q/", RangeEnd: prefix.RangeEnd, Type: PermissionWrite}, single} {
		if err := op.RoleGrant(ctx, "quirk", p); err != nil {
			t.Fatal(err)
		}
	}
	twice(t, "granting the whole keyspace", func() error {
		return op.RoleGrant(ctx, "quirk", AuthPermission{Key: "\x00", RangeEnd: "\x00", Type: PermissionRead})
	})
	st := authState(t, op)
	want := []AuthPermission{
		{Key: "\x00", RangeEnd: "\x00", Type: PermissionRead},
		single,
		{Key: "/q/", RangeEnd: prefix.RangeEnd, Type: PermissionWrite},
	}
	if !reflect.DeepEqual(st.Roles["quirk"], want) {
		t.Errorf("role quirk\n got %q\nwant %q", st.Roles["quirk"], want)
	}

	// And the steps that take away do take away.
	twice(t, "revoking the prefix", func() error { return op.RoleRevoke(ctx, "quirk", prefix.Key, prefix.RangeEnd) })
	twice(t, "adding user quirk", func() error { return op.UserAdd(ctx, "quirk", "") })
	twice(t, "granting quirk to quirk", func() error { return op.UserGrantRole(ctx, "quirk", "quirk") })
	if st = authState(t, op); !reflect.DeepEqual(st.Roles["quirk"], want[:2]) || !reflect.DeepEqual(st.Users["quirk"], []string{"quirk"}) {
		t.Errorf("after revoking the prefix and granting the role: role %q, user %q", st.Roles["quirk"], st.Users["quirk"])
	}
	twice(t, "revoking quirk from quirk", func() error { return op.UserRevokeRole(ctx, "quirk", "quirk") })
	if st = authState(t, op); !reflect.DeepEqual(st.Users["quirk"], []string{}) {
		t.Errorf("after revoking the role: user %q, want no roles", st.Users["quirk"])
	}
	twice(t, "deleting user quirk", func() error { return op.UserDelete(ctx, "quirk") })
	twice(t, "deleting role quirk", func() error { return op.RoleDelete(ctx, "quirk") })
	if st = authState(t, op); st.Roles["quirk"] != nil || st.Users["quirk"] != nil {
		t.Errorf("after deleting: %+v", st)
	}
}

func authState(t *testing.T, c *Client) AuthState {
	t.Helper()
	st, err := c.AuthState(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func freshLeaf(am *authMember, cn string) *pki.Leaf {
	am.t.Helper()
	leaf, err := am.ca.IssueClient(cn, time.Now().Add(-time.Minute), time.Hour)
	if err != nil {
		am.t.Fatal(err)
	}
	return leaf
}

// handshake opens a TLS connection to the member with leaf and starts HTTP/2 on it: the member
// answers with its settings when it let the connection in, and closes it when it refused the
// certificate after the handshake (etcd checks the revocation list then; under TLS 1.3 the
// client's handshake has completed already).
func handshake(am *authMember, leaf *pki.Leaf) error {
	cfg := &tls.Config{RootCAs: pki.Pool([]*x509.Certificate{am.ca.Cert}), MinVersion: tls.VersionTLS12, ServerName: "127.0.0.1",
		NextProtos:   []string{"h2"},
		Certificates: []tls.Certificate{{Certificate: [][]byte{leaf.Cert.Raw}, PrivateKey: leaf.Key}}}
	d := tls.Dialer{Config: cfg}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", am.url[len("https://"):])
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	// The client preface and an empty SETTINGS frame.
	if _, err := conn.Write(append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 4, 0, 0, 0, 0, 0)); err != nil {
		return err
	}
	if _, err := conn.Read(make([]byte, 9)); err != nil {
		return err
	}
	return nil
}

// With auth on, a client that presents no user at all (no certificate on a plain port) is still
// told that auth is on.
func TestAuthEnabledWithoutCredentials(t *testing.T) {
	cl, c := startWithClient(t, 1)
	ctx := tctx(t)
	twice(t, "adding user root", func() error { return c.UserAdd(ctx, "root", "secret") })
	twice(t, "granting root to root", func() error { return c.UserGrantRole(ctx, "root", "root") })
	twice(t, "enabling auth", func() error { return c.AuthEnable(ctx) })
	r, err := c.cluster().AuthStatus(ctx)
	t.Logf("AuthStatus without a user, auth on: %v, %v", r, err)
	if on, err := c.AuthEnabled(ctx); err != nil || !on {
		t.Errorf("AuthEnabled without a user: %v, %v; want true", on, err)
	}
	if _, err := c.cluster().Put(ctx, "/x", "1"); !errors.Is(err, rpctypes.ErrUserEmpty) {
		t.Errorf("a write without a user: %v, want user name empty", err)
	}
	// The root user by password turns it off again.
	root, err := clientv3.New(clientv3.Config{Endpoints: cl.ClientURLs(), Username: "root", Password: "secret",
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = root.Close() }()
	if _, err := root.AuthDisable(ctx); err != nil {
		t.Fatal(err)
	}
	if on, err := c.AuthEnabled(ctx); err != nil || on {
		t.Errorf("AuthEnabled after disabling: %v, %v; want false", on, err)
	}
}
