package v1alpha1_test

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func tenantAuth() *stewardv1.AuthSpec {
	return &stewardv1.AuthSpec{
		Enabled: true,
		Roles: []stewardv1.AuthRole{{Name: "tenant-a", Permissions: []stewardv1.AuthPermission{
			{Prefix: "/a/", Access: stewardv1.AccessReadWrite}, {Key: "/shared/config", Access: stewardv1.AccessRead},
		}}},
		Users: []stewardv1.AuthUser{
			{Name: "app-a", Roles: []string{"tenant-a"}},
			{Name: "admin", Roles: []string{"root"}, PasswordSecretRef: &stewardv1.PasswordSecretRef{Name: "admin-password"}},
		},
	}
}

func TestAuthValidation(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*stewardv1.AuthSpec, *stewardv1.EtcdCluster)
		want   string // "" = admitted
	}{
		{"tenants with prefixes, a root admin with a password", nil, ""},
		{"auth declared but off", func(a *stewardv1.AuthSpec, _ *stewardv1.EtcdCluster) { a.Enabled = false }, ""},
		{"an undeclared role", func(a *stewardv1.AuthSpec, _ *stewardv1.EtcdCluster) { a.Users[0].Roles = []string{"tenant-b"} },
			"spec.auth.users[].roles: every role must be declared in spec.auth.roles (or be root)"},
		{"the root role declared", func(a *stewardv1.AuthSpec, _ *stewardv1.EtcdCluster) { a.Roles[0].Name = "root" },
			"root and steward-full-access are Steward's own roles"},
		{"Steward's full-access role declared", func(a *stewardv1.AuthSpec, _ *stewardv1.EtcdCluster) {
			a.Roles = append(a.Roles, stewardv1.AuthRole{Name: "steward-full-access", Permissions: a.Roles[0].Permissions})
		}, "root and steward-full-access are Steward's own roles"},
		{"key and prefix together", func(a *stewardv1.AuthSpec, _ *stewardv1.EtcdCluster) { a.Roles[0].Permissions[0].Key = "/a/x" },
			"set exactly one of key or prefix"},
		{"neither key nor prefix", func(a *stewardv1.AuthSpec, _ *stewardv1.EtcdCluster) { a.Roles[0].Permissions[0].Prefix = "" },
			"set exactly one of key or prefix"},
		{"a role without permissions", func(a *stewardv1.AuthSpec, _ *stewardv1.EtcdCluster) { a.Roles[0].Permissions = nil },
			"spec.auth.roles[0].permissions"},
		{"an unknown access", func(a *stewardv1.AuthSpec, _ *stewardv1.EtcdCluster) { a.Roles[0].Permissions[0].Access = "Admin" },
			"Unsupported value"},
		{"user root", func(a *stewardv1.AuthSpec, _ *stewardv1.EtcdCluster) { a.Users[0].Name = "root" },
			"root, steward-operator and steward-backup are Steward's own users"},
		{"the operator's user", func(a *stewardv1.AuthSpec, _ *stewardv1.EtcdCluster) { a.Users[0].Name = "steward-operator" },
			"Steward's own users"},
		{"the backups' user", func(a *stewardv1.AuthSpec, _ *stewardv1.EtcdCluster) { a.Users[0].Name = "steward-backup" },
			"Steward's own users"},
		{"the shared client's user", func(a *stewardv1.AuthSpec, c *stewardv1.EtcdCluster) { a.Users[0].Name = c.Name + "-client" },
			"<cluster>-client is Steward's own user"},
		{"a name etcdctl could not type", func(a *stewardv1.AuthSpec, _ *stewardv1.EtcdCluster) { a.Users[0].Name = "app a" },
			"should match"},
		{"auth without TLS", func(_ *stewardv1.AuthSpec, c *stewardv1.EtcdCluster) {
			c.Spec.TLS = &stewardv1.TLSSpec{Enabled: ptr.To(false)}
		},
			"spec.auth needs spec.tls enabled"},
		{"the user's own certificates", func(_ *stewardv1.AuthSpec, c *stewardv1.EtcdCluster) {
			c.Spec.TLS = &stewardv1.TLSSpec{Peer: stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret, SecretName: "p"},
				Client: stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret, SecretName: "c"}}
		}, "spec.auth needs certificates Steward issues (spec.tls source Operator)"},
		{"cert-manager's certificates, roles only", func(a *stewardv1.AuthSpec, c *stewardv1.EtcdCluster) {
			a.Users = nil
			c.Spec.TLS = &stewardv1.TLSSpec{Peer: stewardv1.TLSPlane{Source: stewardv1.TLSSourceCertManager, IssuerRef: &stewardv1.IssuerRef{Name: "i"}},
				Client: stewardv1.TLSPlane{Source: stewardv1.TLSSourceCertManager, IssuerRef: &stewardv1.IssuerRef{Name: "i"}}}
		}, "spec.auth needs certificates Steward issues (spec.tls source Operator)"},
		{"users with the Operator source named", func(_ *stewardv1.AuthSpec, c *stewardv1.EtcdCluster) {
			c.Spec.TLS = &stewardv1.TLSSpec{Peer: stewardv1.TLSPlane{Source: stewardv1.TLSSourceOperator}}
		}, ""},
		{"auth off without TLS is fine", func(a *stewardv1.AuthSpec, c *stewardv1.EtcdCluster) {
			a.Enabled = false
			c.Spec.TLS = &stewardv1.TLSSpec{Enabled: ptr.To(false)}
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ec := newCluster(nil)
			ec.Spec.Auth = tenantAuth()
			if c.mutate != nil {
				c.mutate(ec.Spec.Auth, ec)
			}
			err := env.Client.Create(ctx(t), ec)
			if c.want == "" {
				if err != nil {
					t.Fatalf("a valid spec.auth was refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("admitted; want refused with %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not contain %q", err, c.want)
			}
		})
	}
}

// spec.auth added to a running cluster is admitted, and removing it while auth is on is refused.
func TestAuthAddedLater(t *testing.T) {
	ec := newCluster(nil)
	if err := env.Client.Create(ctx(t), ec); err != nil {
		t.Fatal(err)
	}
	ec.Spec.Auth = tenantAuth()
	if err := env.Client.Update(ctx(t), ec); err != nil {
		t.Fatalf("update with spec.auth: %v", err)
	}
	ec.Spec.Auth = nil
	err := env.Client.Update(ctx(t), ec)
	if err == nil || !strings.Contains(err.Error(), "spec.auth cannot be removed while auth is on") {
		t.Fatalf("removing spec.auth while enabled: %v", err)
	}
}
