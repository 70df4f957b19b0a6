package controller_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/controller"
)

// A password Secret is the user's own, without Steward's cluster label, so the operator's cache
// (which, as internal/manager configures it, holds only cluster-labelled Secrets) never shows it:
// the password is read past the cache, or a password user would wait forever.
func TestPasswordReadPastTheCache(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := namespace(t)
	owned, err := k8slabels.Parse(stewardv1.LabelCluster)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.New(env.Config, cache.Options{Scheme: env.Client.Scheme(),
		ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {Label: owned}}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	cached, err := client.New(env.Config, client.Options{Scheme: env.Client.Scheme(), Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "admin-password", Namespace: ns}, StringData: map[string]string{"password": "pw"}}
	if err := env.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	r := &controller.EtcdClusterReconciler{Client: cached, APIReader: env.Client}
	ec := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns}}
	pw, err := r.Password(ctx, ec, stewardv1.AuthUser{Name: "admin", PasswordSecretRef: &stewardv1.PasswordSecretRef{Name: "admin-password"}})
	if err != nil || string(pw) != "pw" {
		t.Fatalf("password = %q, %v; want the Secret's", pw, err)
	}
}
