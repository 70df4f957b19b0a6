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
// (which, as internal/manager configures it, holds only cluster-labelled Secrets) does not show
// it at first: the password is read past the cache, or a password user would wait forever. That
// read labels it with the cluster, so the cache (and the watch that reconciles on its changes)
// holds it from then on and no later read goes past the cache; a change shows in the cache. A
// Secret labelled for another cluster is left alone, and read from the cache as well (the cache
// holds every Secret with the label's key).
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
	live := &countingReader{Reader: env.Client}
	r := &controller.EtcdClusterReconciler{Client: cached, APIReader: live}
	ec := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns}}
	admin := stewardv1.AuthUser{Name: "admin", PasswordSecretRef: &stewardv1.PasswordSecretRef{Name: "admin-password"}}
	read := func(user stewardv1.AuthUser, want string) {
		t.Helper()
		pw, err := r.Password(ctx, ec, user)
		if err != nil || string(pw) != want {
			t.Fatalf("password = %q, %v; want %q", pw, err, want)
		}
	}
	read(admin, "pw")
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil || s.Labels[stewardv1.LabelCluster] != "demo" {
		t.Fatalf("the password Secret's labels %v (%v): want the cluster's", s.Labels, err)
	}
	waitCached := func(obj client.Object, want string) {
		t.Helper()
		for ctx.Err() == nil {
			var got corev1.Secret
			if cached.Get(ctx, client.ObjectKeyFromObject(obj), &got) == nil && string(got.Data["password"]) == want {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("the cache never showed the password Secret with %q", want)
	}
	waitCached(s, "pw")
	before := live.gets
	read(admin, "pw")
	s.StringData = map[string]string{"password": "changed"}
	if err := env.Client.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	waitCached(s, "changed")
	read(admin, "changed")
	if live.gets != before {
		t.Errorf("%d reads past the cache once the Secret is labelled, want 0", live.gets-before)
	}

	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shared-password", Namespace: ns,
		Labels: map[string]string{stewardv1.LabelCluster: "another"}}, StringData: map[string]string{"password": "pw2"}}
	if err := env.Client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	waitCached(other, "pw2")
	before = live.gets
	read(stewardv1.AuthUser{Name: "app", PasswordSecretRef: &stewardv1.PasswordSecretRef{Name: "shared-password"}}, "pw2")
	if live.gets != before {
		t.Errorf("%d reads past the cache for a Secret labelled for another cluster, want 0 (the cache holds it)", live.gets-before)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(other), other); err != nil || other.Labels[stewardv1.LabelCluster] != "another" {
		t.Errorf("another cluster's password Secret relabelled: %v (%v)", other.Labels, err)
	}
}

// countingReader counts the reads that go past the cache.
type countingReader struct {
	client.Reader
	gets int
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets++
	return c.Reader.Get(ctx, key, obj, opts...)
}
