//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestOperatorMetricsSecure (issue 14, item 2): the operator's metrics Service serves HTTPS to
// callers whose token may get /metrics (ClusterRole steward-metrics-reader), and nobody else; the
// steward_ metrics of a settled cluster are there.
func TestOperatorMetricsSecure(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "mx", 1, "")
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scraper"}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "steward-metrics-" + ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "steward-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "scraper"}}}
	for _, o := range []client.Object{sa, binding} {
		if err := f.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = f.Client.Delete(context.Background(), binding) })
	tr, err := f.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "scraper",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var svc corev1.Service
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: f.OperatorNamespace, Name: "steward-controller-manager-metrics"}, &svc); err != nil {
		t.Fatal(err)
	}
	url := "https://" + net.JoinHostPort(svc.Spec.ClusterIP, "8443") + "/metrics"
	// The serving certificate is self-signed: the caller's token is what is checked.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a self-signed serving certificate; the token is checked
	get := func(token string) (int, string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	if code, _, err := get(""); err != nil || code != http.StatusUnauthorized {
		t.Errorf("without a token: %d, %v; want 401", code, err)
	}
	want := fmt.Sprintf(`steward_cluster_quorum_healthy{cluster="mx",namespace="%s"} 1`, ns)
	f.WaitFor(t, ns, "the cluster's metrics served to the scraper", time.Minute, func(ctx context.Context) (bool, error) {
		code, body, err := get(tr.Status.Token)
		if err != nil {
			return false, err
		}
		return code == http.StatusOK && strings.Contains(body, want), fmt.Errorf("HTTP %d, %d bytes", code, len(body))
	})
}
