package metrics

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRequestAttributes(t *testing.T) {
	for _, c := range []struct{ method, url, verb, resource string }{
		{"GET", "/api/v1/namespaces/ns/pods/db-0", "get", "pods"},
		{"GET", "/api/v1/namespaces/ns/pods?labelSelector=x", "list", "pods"},
		{"GET", "/api/v1/pods?watch=true&resourceVersion=5", "watch", "pods"},
		{"PATCH", "/api/v1/namespaces/ns/pods/db-0/resize", "patch", "pods/resize"},
		{"PUT", "/apis/etcd.steward.dev/v1alpha1/namespaces/ns/etcdclusters/db/status", "update", "etcdclusters.etcd.steward.dev/status"},
		{"POST", "/apis/coordination.k8s.io/v1/namespaces/sys/leases", "create", "leases.coordination.k8s.io"},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/sys/leases/steward", "update", "leases.coordination.k8s.io"},
		{"POST", "/apis/authentication.k8s.io/v1/tokenreviews", "create", "tokenreviews.authentication.k8s.io"},
		{"DELETE", "/api/v1/namespaces/ns/secrets/s", "delete", "secrets"},
		{"DELETE", "/api/v1/namespaces/ns/secrets", "deletecollection", "secrets"},
		{"GET", "/api/v1/namespaces/ns", "get", "namespaces"},
		{"GET", "/api/v1/namespaces", "list", "namespaces"},
		{"GET", "/version", "get", "other"},
		{"GET", "/apis", "get", "other"},
	} {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		if verb, res := RequestAttributes(c.method, u); verb != c.verb || res != c.resource {
			t.Errorf("%s %s: %s %s, want %s %s", c.method, c.url, verb, res, c.verb, c.resource)
		}
	}
}

func TestAPICounterCountsThroughTheTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	r, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	c := r.API
	client := &http.Client{Transport: c.Wrap(http.DefaultTransport)}
	for range 2 {
		req, _ := http.NewRequest(http.MethodPatch, srv.URL+"/api/v1/namespaces/ns/pods/p", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	if got := testutil.ToFloat64(c.vec.WithLabelValues("patch", "pods")); got != 2 {
		t.Fatalf("counted %v patches of pods, want 2", got)
	}
}
