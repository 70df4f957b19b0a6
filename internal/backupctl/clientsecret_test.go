package backupctl_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/backupctl"
)

// With etcd auth declared, Jobs present the backups' own certificate (root) once the operator has
// written it, and the shared client's before that (auth is not on yet then); without auth, the
// shared client's.
func TestJobClientSecret(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "jobtls-"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	ec := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns.Name}}
	secret := func() string {
		t.Helper()
		s, err := backupctl.JobClientSecret(ctx, env.Client, ec)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got := secret(); got != "demo-client-tls" {
		t.Errorf("without auth: %s", got)
	}
	ec.Spec.Auth = &stewardv1.AuthSpec{Enabled: true}
	if got := secret(); got != "demo-client-tls" {
		t.Errorf("auth declared, the backups' Secret not written yet: %s", got)
	}
	if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "demo-backup-tls", Namespace: ns.Name}}); err != nil {
		t.Fatal(err)
	}
	if got := secret(); got != "demo-backup-tls" {
		t.Errorf("auth declared, the backups' Secret written: %s", got)
	}
	ec.Spec.Auth = nil
	if got := secret(); got != "demo-client-tls" {
		t.Errorf("auth gone: %s", got)
	}
}
