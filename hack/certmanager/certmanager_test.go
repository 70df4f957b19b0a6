package main

// TestIssuance runs the built cert-manager-controller against an envtest kube-apiserver with
// cert-manager's CRDs (no webhook, no kubelet) and issues a CA and leaf certificates through
// SelfSigned, CA Issuer and CA ClusterIssuer, as Steward's e2e tests will.
//
//	hack/toolchain.sh envtest && hack/toolchain.sh certmanager && (cd hack/certmanager && go test -count=1 -v .)
//
// The binary is $CERTMANAGER_BIN or `hack/toolchain.sh path certmanager` (skipped when neither
// exists); the CRDs are $CERTMANAGER_CRDS or the crds/ directory next to the binary.

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	cmclient "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned"
)

const ns = "certmanager-test"

func TestIssuance(t *testing.T) {
	bin, crds := binaryAndCRDs(t)
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		assets, _ := filepath.Abs("../../_out/envtest")
		if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
			t.Fatalf("no envtest binaries in %s: run `make envtest` or set KUBEBUILDER_ASSETS", assets)
		}
		t.Setenv("KUBEBUILDER_ASSETS", assets)
	}

	env := &envtest.Environment{CRDDirectoryPaths: []string{crds}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	t.Cleanup(func() { _ = env.Stop() }) // also after a failed Start: the processes may be up
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	admin, err := env.AddUser(envtest.User{Name: "cert-manager", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}

	kube := kubernetes.NewForConfigOrDie(cfg)
	cm := cmclient.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if _, err := kube.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	startController(t, bin, "--kubeconfig", kubeconfigPath, "--cluster-resource-namespace", ns, "-v", "2")

	// SelfSigned Issuer -> CA Certificate -> CA Issuer and CA ClusterIssuer -> leaf Certificates.
	must(t, create(ctx, cm, &cmapi.Issuer{
		ObjectMeta: metav1.ObjectMeta{Name: "selfsigned", Namespace: ns},
		Spec:       cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{SelfSigned: &cmapi.SelfSignedIssuer{}}},
	}))
	must(t, create(ctx, cm, &cmapi.Certificate{
		ObjectMeta: metav1.ObjectMeta{Name: "ca", Namespace: ns},
		Spec: cmapi.CertificateSpec{
			IsCA:       true,
			CommonName: "steward test CA",
			SecretName: "ca",
			PrivateKey: &cmapi.CertificatePrivateKey{Algorithm: cmapi.ECDSAKeyAlgorithm, Size: 256},
			IssuerRef:  cmmeta.IssuerReference{Name: "selfsigned", Kind: cmapi.IssuerKind, Group: "cert-manager.io"},
		},
	}))
	ca := cmapi.IssuerConfig{CA: &cmapi.CAIssuer{SecretName: "ca"}}
	must(t, create(ctx, cm, &cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Name: "ca", Namespace: ns},
		Spec: cmapi.IssuerSpec{IssuerConfig: ca}}))
	// Its Secret is looked up in --cluster-resource-namespace, which is ns here.
	must(t, create(ctx, cm, &cmapi.ClusterIssuer{ObjectMeta: metav1.ObjectMeta{Name: "ca"},
		Spec: cmapi.IssuerSpec{IssuerConfig: ca}}))

	dnsNames := []string{"etcd.certmanager-test.svc", "*.etcd.certmanager-test.svc"}
	leaf := func(name, kind string) *cmapi.Certificate {
		return &cmapi.Certificate{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: cmapi.CertificateSpec{
				SecretName: name,
				DNSNames:   dnsNames,
				Usages:     []cmapi.KeyUsage{cmapi.UsageServerAuth, cmapi.UsageClientAuth},
				PrivateKey: &cmapi.CertificatePrivateKey{Algorithm: cmapi.ECDSAKeyAlgorithm, Size: 256},
				IssuerRef:  cmmeta.IssuerReference{Name: "ca", Kind: kind, Group: "cert-manager.io"},
			},
		}
	}
	must(t, create(ctx, cm, leaf("leaf", cmapi.IssuerKind)))
	must(t, create(ctx, cm, leaf("leaf-cluster", cmapi.ClusterIssuerKind)))

	start := time.Now()
	caSecret := waitIssued(ctx, t, kube, cm, "ca")
	for _, name := range []string{"leaf", "leaf-cluster"} {
		s := waitIssued(ctx, t, kube, cm, name)
		checkLeaf(t, name, s, caSecret.Data["tls.crt"], dnsNames)
	}
	t.Logf("all certificates Ready %s after creation", time.Since(start).Round(100*time.Millisecond))
}

// binaryAndCRDs finds the controller binary and cert-manager's CRDs, or skips the test.
func binaryAndCRDs(t *testing.T) (bin, crds string) {
	bin = os.Getenv("CERTMANAGER_BIN")
	if bin == "" {
		out, err := exec.Command("../toolchain.sh", "path", "certmanager").Output()
		bin = strings.TrimSpace(string(out))
		if err != nil {
			t.Skipf("cert-manager-controller not built (%s): run `hack/toolchain.sh certmanager` or set CERTMANAGER_BIN", bin)
		}
	}
	crds = os.Getenv("CERTMANAGER_CRDS")
	if crds == "" {
		crds = filepath.Join(filepath.Dir(bin), "crds")
	}
	return bin, crds
}

// startController runs the binary until the end of the test, then stops it with SIGTERM
// (SIGKILL after 10s) and checks that it exited cleanly. Its output is logged on failure.
func startController(t *testing.T, bin string, args ...string) {
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out // both written by exec's copying goroutines: cmd.Wait syncs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		var err error
		select {
		case err = <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			err = fmt.Errorf("no exit 10s after SIGTERM: killed (%w)", <-exited)
		}
		if err != nil {
			t.Errorf("cert-manager-controller: %v", err)
		}
		if t.Failed() || testing.Verbose() {
			t.Logf("cert-manager-controller output:\n%s", tail(out.String(), 200))
		}
	})
}

func create[T interface {
	*cmapi.Issuer | *cmapi.ClusterIssuer | *cmapi.Certificate
}](ctx context.Context, cm cmclient.Interface, obj T) error {
	var err error
	switch o := any(obj).(type) {
	case *cmapi.Issuer:
		_, err = cm.CertmanagerV1().Issuers(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *cmapi.ClusterIssuer:
		_, err = cm.CertmanagerV1().ClusterIssuers().Create(ctx, o, metav1.CreateOptions{})
	case *cmapi.Certificate:
		_, err = cm.CertmanagerV1().Certificates(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	}
	return err
}

// waitIssued waits for Certificate name to be Ready and its Secret to hold the key pair and CA.
func waitIssued(ctx context.Context, t *testing.T, kube kubernetes.Interface, cm cmclient.Interface, name string) *corev1.Secret {
	t.Helper()
	var last string
	for {
		crt, err := cm.CertmanagerV1().Certificates(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("certificate %s: %v (last seen: %s)", name, err, last)
		}
		last = fmt.Sprintf("%+v", crt.Status.Conditions)
		ready := slices.ContainsFunc(crt.Status.Conditions, func(c cmapi.CertificateCondition) bool {
			return c.Type == cmapi.CertificateConditionReady && c.Status == cmmeta.ConditionTrue
		})
		s, err := kube.CoreV1().Secrets(ns).Get(ctx, crt.Spec.SecretName, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		if ready && err == nil && len(s.Data["tls.crt"]) > 0 && len(s.Data["tls.key"]) > 0 && len(s.Data["ca.crt"]) > 0 {
			return s
		}
		select {
		case <-ctx.Done():
			t.Fatalf("certificate %s not issued: %v; conditions: %s", name, ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// checkLeaf checks the leaf's names and usages and that it chains to the CA.
func checkLeaf(t *testing.T, name string, s *corev1.Secret, caPEM []byte, dnsNames []string) {
	t.Helper()
	crt := parseCert(t, s.Data["tls.crt"])
	if !slices.Equal(crt.DNSNames, dnsNames) {
		t.Errorf("%s: DNS names %v, want %v", name, crt.DNSNames, dnsNames)
	}
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if !slices.Contains(crt.ExtKeyUsage, u) {
			t.Errorf("%s: extended key usages %v lack %v", name, crt.ExtKeyUsage, u)
		}
	}
	if crt.IsCA {
		t.Errorf("%s: leaf is a CA", name)
	}
	if !bytes.Equal(s.Data["ca.crt"], caPEM) {
		t.Errorf("%s: ca.crt is not the CA's certificate", name)
	}
	roots := x509.NewCertPool()
	roots.AddCert(parseCert(t, caPEM))
	if _, err := crt.Verify(x509.VerifyOptions{DNSName: "member-0.etcd.certmanager-test.svc", Roots: roots,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Errorf("%s: %v", name, err)
	}
}

func parseCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("no PEM block in %q", data)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
