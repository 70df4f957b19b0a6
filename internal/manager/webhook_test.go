package manager_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/etcd-steward/steward/internal/testenv"
)

// The manager of TestManagerServesHealth runs with the binary's defaults in a Pod's namespace,
// next to the objects the install creates (the empty Secret and the webhook configuration of
// config/webhook, renamed as kustomize does): checkWebhookCertificate then sees the rotator write a
// CA and serving certificate into the Secret and the CA into the configuration and, once the files
// are where the kubelet would project them, the webhook server serve a certificate the
// configuration's CA verifies for the Service.

// installWebhookObjects creates what config/webhook installs, in namespace default.
func installWebhookObjects(t *testing.T, env *testenv.Env) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "steward-webhook-server-cert", Namespace: "default"}}
	if err := env.Client.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	installWebhookConfiguration(t, env)
}

// installWebhookConfiguration creates config/webhook's configuration, renamed as kustomize does,
// and sets POD_NAMESPACE as the Deployment does: the rotator runs only in a Pod's namespace.
func installWebhookConfiguration(t *testing.T, env *testenv.Env) {
	t.Helper()
	t.Setenv("POD_NAMESPACE", "default")
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "webhook", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.Unmarshal(raw, &vwc); err != nil {
		t.Fatal(err)
	}
	vwc.Name = "steward-eviction"
	vwc.Webhooks[0].ClientConfig.Service.Name, vwc.Webhooks[0].ClientConfig.Service.Namespace = "steward-webhook-service", "default"
	if err := env.Client.Create(context.Background(), &vwc); err != nil {
		t.Fatal(err)
	}
}

// checkWebhookCertificate waits for the rotator's certificate and CA bundle, projects the
// certificate into certDir as the kubelet would, and checks what the server on port serves.
func checkWebhookCertificate(t *testing.T, env *testenv.Env, certDir, port string) {
	t.Helper()
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "steward-webhook-server-cert", Namespace: "default"}}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "steward-eviction"}}
	var bundle []byte
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vwc), vwc); err != nil {
			t.Fatal(err)
		}
		bundle = vwc.Webhooks[0].ClientConfig.CABundle
		if len(secret.Data["tls.crt"]) > 0 && len(bundle) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no certificate in the Secret (%d keys) or no CA in the configuration (%d bytes)", len(secret.Data), len(bundle))
		}
	}
	for _, f := range []string{"tls.crt", "tls.key"} { // the kubelet's projection of the Secret
		if err := os.WriteFile(filepath.Join(certDir, f), secret.Data[f], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		t.Fatal("the configuration's caBundle holds no certificate")
	}
	cfg := &tls.Config{RootCAs: roots, ServerName: "steward-webhook-service.default.svc", MinVersion: tls.VersionTLS12}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		c, err := tls.Dial("tcp", "127.0.0.1:"+port, cfg)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the webhook server does not serve a certificate the CA bundle verifies: %v", err)
		}
	}
}
