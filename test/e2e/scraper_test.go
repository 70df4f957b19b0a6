//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// scraper reads the operator's metrics Service as Prometheus does: HTTPS with the token of a
// ServiceAccount bound to the ClusterRole steward-metrics-reader.
type scraper struct {
	url   string
	token string
	hc    *http.Client
}

func newScraper(t *testing.T, ns string) *scraper {
	t.Helper()
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
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(1800))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var svc corev1.Service
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: f.OperatorNamespace, Name: "steward-controller-manager-metrics"}, &svc); err != nil {
		t.Fatal(err)
	}
	return &scraper{
		url:   "https://" + net.JoinHostPort(svc.Spec.ClusterIP, "8443") + "/metrics",
		token: tr.Status.Token,
		// The serving certificate is self-signed: the caller's token is what is checked.
		hc: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}, //nolint:gosec // a self-signed serving certificate; the token is checked
	}
}

// get scrapes once, with the token or without it.
func (s *scraper) get(ctx context.Context, withToken bool) (int, string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if withToken {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// families scrapes and parses (a scraper refuses text that does not parse).
func (s *scraper) families(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	_, body, err := s.get(ctx, true)
	if err != nil {
		return nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(strings.NewReader(body))
}

// sum adds the values of a family's series whose labels include every one given.
func sum(families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	total := 0.0
	for _, m := range families[name].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range labels {
			match = match && have[k] == v
		}
		if match {
			total += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return total
}
