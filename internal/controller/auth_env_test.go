package controller_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/authplan"
	"github.com/etcd-steward/steward/internal/controller"
	"github.com/etcd-steward/steward/internal/etcd"
	"github.com/etcd-steward/steward/internal/pki"
)

// The controller's auth rounds against a real etcd serving mutual TLS, with the operator's own
// certificate (CN steward-operator): Steward's own users first, a declared role, tenant users
// held until the revocation list is served (and auth with them), a missing password Secret
// reported on its user; without tenants auth goes on, and the operator, the backups' identity and
// the shared client keep their access while an unknown certificate is refused; then auth goes off.
// Every etcd step runs twice, as after a crash before status was written.
func TestAuthRoundsOnARealEtcd(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ca, url := startTLSSource(t, ns)
	operator := stewardClient(t, ca, url, controller.OperatorCommonName)
	r := &controller.EtcdClusterReconciler{Client: env.Client}
	ec := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns}}
	ec.Spec.Auth = &stewardv1.AuthSpec{Enabled: true,
		Roles: []stewardv1.AuthRole{{Name: "tenant-a", Permissions: []stewardv1.AuthPermission{{Prefix: "/a/", Access: stewardv1.AccessReadWrite}}}},
		Users: []stewardv1.AuthUser{
			{Name: "app-a", Roles: []string{"tenant-a"}},
			{Name: "admin", Roles: []string{"root"}, PasswordSecretRef: &stewardv1.PasswordSecretRef{Name: "admin-password"}},
		},
	}
	rounds := func(want authplan.Kind) []string {
		t.Helper()
		var kinds []string
		for range 40 {
			s, err := r.AuthRound(ctx, ec, operator)
			if err != nil {
				t.Fatalf("%s: %v (steps %v)", s, err, kinds)
			}
			kinds = append(kinds, string(s.Kind))
			if s.Kind == authplan.Wait || s.Kind == authplan.Refuse || s.Done() {
				if s.Kind != want {
					t.Fatalf("ended on %s, want %s (steps %v)", s, want, kinds)
				}
				return kinds
			}
			if s.Kind != authplan.Record && s.Kind != authplan.RevokeCertificates {
				if err := r.AuthApply(ctx, ec.DeepCopy(), operator, s); err != nil { // the same step again
					t.Fatalf("repeating %s: %v", s, err)
				}
			}
		}
		t.Fatalf("no end: %v", kinds)
		return nil
	}

	steps := rounds(authplan.Wait)
	if got := strings.Join(steps, " "); got != "RoleAdd RoleGrant UserAdd UserGrant UserAdd UserGrant UserAdd UserGrant UserAdd UserGrant Record RoleAdd RoleGrant Wait" {
		t.Errorf("steps: %s", got)
	}
	st := ec.Status.Auth
	if st.Phase != "Enabling" || !strings.Contains(st.Message, "revocation list") || !slices.Equal(st.ManagedRoles, []string{"tenant-a"}) {
		t.Errorf("status %+v", st)
	}
	if len(st.Users) != 2 || st.Users[0] != (stewardv1.AuthUserStatus{Name: "admin", State: "WaitingForPassword",
		Message: "the password Secret admin-password is not found"}) || st.Users[1].State != "Pending" {
		t.Errorf("users %+v", st.Users)
	}
	state, err := operator.AuthState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if state.Enabled {
		t.Fatal("auth went on while a declared user waits")
	}
	for _, u := range []string{"root", "steward-operator", "steward-backup"} {
		if !slices.Equal(state.Users[u], []string{"root"}) {
			t.Errorf("user %s has roles %v", u, state.Users[u])
		}
	}
	if !slices.Equal(state.Users["demo-client"], []string{"steward-full-access"}) ||
		!slices.Equal(state.Roles["tenant-a"], []etcd.AuthPermission{{Key: "/a/", RangeEnd: "/a0", Type: "readwrite"}}) {
		t.Errorf("etcd: %+v", state)
	}

	ec.Spec.Auth.Users = nil // no tenants yet: auth goes on
	if got := strings.Join(rounds(authplan.Nothing), " "); got != "AuthEnable Nothing" {
		t.Errorf("steps: %s", got)
	}
	// Only root may compact: without etcd's auto-compaction status says nothing compacts history.
	if ec.Status.Auth.Phase != "On" || ec.Status.Auth.Message != authplan.CompactionHint {
		t.Errorf("status %+v", ec.Status.Auth)
	}
	ec.Spec.Options.AutoCompactionMode, ec.Spec.Options.AutoCompactionRetention = "periodic", "5m"
	rounds(authplan.Nothing)
	if ec.Status.Auth.Phase != "On" || ec.Status.Auth.Message != "" {
		t.Errorf("status with auto-compaction set: %+v", ec.Status.Auth)
	}
	if _, _, err := operator.MemberList(ctx); err != nil {
		t.Errorf("the operator lost its access: %v", err)
	}
	backup := rawClient(t, ca, url, controller.BackupCommonName)
	if _, err := backup.Status(ctx, url); err != nil {
		t.Errorf("the backups' identity: %v", err)
	}
	shared := rawClient(t, ca, url, "demo-client")
	if _, err := shared.Put(ctx, "/anything", "x"); err != nil {
		t.Errorf("the shared client lost its access: %v", err)
	}
	stranger := rawClient(t, ca, url, "stranger")
	if _, err := stranger.Get(ctx, "/anything"); !errors.Is(err, rpctypes.ErrUserNotFound) && !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("a certificate without a user: %v, want refused", err)
	}

	// The same etcd under a cluster without spec.auth (a backup taken with auth on restored under
	// another spec): status says auth is on and what to do, and Steward changes nothing.
	now := time.Now()
	r2 := &controller.EtcdClusterReconciler{Client: env.Client, Clock: func() time.Time { return now }}
	bare := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "restored", Namespace: ns, UID: "uid-restored"}}
	bare.Status.ClusterID = "c1"
	undeclared := func(want string) {
		t.Helper()
		s, err := r2.AuthRound(ctx, bare, operator)
		if err != nil || s.Kind != authplan.Nothing {
			t.Fatalf("without spec.auth: step %v, %v", s, err)
		}
		got := "no status.auth"
		if a := bare.Status.Auth; a != nil {
			got = string(a.Phase)
			if !strings.Contains(a.Message, "restored-client") || !strings.Contains(a.Message, "declare spec.auth") {
				t.Errorf("message %q: want the shared client's user and the way out", a.Message)
			}
		}
		if got != want {
			t.Errorf("without spec.auth: %s, want %s", got, want)
		}
	}
	undeclared("Undeclared")

	ec.Spec.Auth.Enabled = false
	if got := strings.Join(rounds(authplan.Nothing), " "); got != "AuthDisable Nothing" {
		t.Errorf("steps: %s", got)
	}
	if ec.Status.Auth.Phase != "Off" {
		t.Errorf("status %+v", ec.Status.Auth)
	}
	if _, err := stranger.Get(ctx, "/anything"); err != nil {
		t.Errorf("auth off, yet: %v", err)
	}
	undeclared("Undeclared") // asked again only every few minutes
	now = now.Add(6 * time.Minute)
	undeclared("no status.auth")
	if err := operator.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	bare.Status.ClusterID = "c2" // a restore: asked at once
	undeclared("Undeclared")

	// A reconcile whose member list failed (no quorum) asks etcd nothing about auth: the reads need
	// a quorum and would wait out their timeout on every reconcile of the outage. Without spec.auth
	// the last answer stands (none for a new cluster ID); with it, the auth step waits.
	bare.Status.Auth, bare.Status.ClusterID = nil, "c3"
	if s := r2.AuthRoundWithoutQuorum(ctx, bare, operator); s.Kind != authplan.Nothing || bare.Status.Auth != nil {
		t.Errorf("without spec.auth and without quorum: step %v, status.auth %+v: want nothing asked", s, bare.Status.Auth)
	}
	ec.Spec.Auth.Enabled = true
	if s := r.AuthRoundWithoutQuorum(ctx, ec, operator); s.Kind != authplan.Wait || !strings.Contains(s.Reason, "member list") {
		t.Errorf("with spec.auth and without quorum: step %+v, want a wait that says why", s)
	}
}

func clientCert(t *testing.T, ca *pki.CA, cn string) tls.Certificate {
	t.Helper()
	leaf, err := ca.IssueClient(cn, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{leaf.Cert.Raw}, PrivateKey: leaf.Key, Leaf: leaf.Cert}
}

// stewardClient is Steward's etcd client with a certificate of the given common name.
func stewardClient(t *testing.T, ca *pki.CA, url, cn string) *etcd.Client {
	t.Helper()
	creds := &etcd.Credentials{}
	creds.Set([]*x509.Certificate{ca.Cert}, []tls.Certificate{clientCert(t, ca, cn)})
	c, err := etcd.New([]string{url}, creds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func rawClient(t *testing.T, ca *pki.CA, url, cn string) *clientv3.Client {
	t.Helper()
	tc := &tls.Config{RootCAs: pki.Pool([]*x509.Certificate{ca.Cert}), MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{clientCert(t, ca, cn)}}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, TLS: tc, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
