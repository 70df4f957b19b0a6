package kubectletcd

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// With etcd auth declared, the plugin presents the backups' certificate (root) once Steward wrote
// it; otherwise, and before that, the shared client's.
func TestClientMaterialUnderAuth(t *testing.T) {
	secret := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "db"},
			Data: map[string][]byte{"ca.crt": []byte("ca"), "tls.crt": []byte(name), "tls.key": []byte("key")}}
	}
	withAuth := fixtureCluster()
	withAuth.Spec.Auth = &stewardv1.AuthSpec{Enabled: true}
	for _, tc := range []struct {
		name string
		ec   *stewardv1.EtcdCluster
		objs []client.Object
		want string
	}{
		{"no auth", fixtureCluster(), []client.Object{secret("demo-client-tls"), secret("demo-backup-tls")}, "demo-client-tls"},
		{"auth, the backups' Secret written", withAuth, []client.Object{secret("demo-client-tls"), secret("demo-backup-tls")}, "demo-backup-tls"},
		{"auth, not written yet", withAuth, []client.Object{secret("demo-client-tls")}, "demo-client-tls"},
	} {
		h := newHarness(t, nil, tc.objs...)
		m, err := loadClientMaterial(context.Background(), h.env, tc.ec)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if m.secret != tc.want || string(m.crt) != tc.want {
			t.Errorf("%s: presents %s (%s), want %s", tc.name, m.secret, m.crt, tc.want)
		}
	}
}
