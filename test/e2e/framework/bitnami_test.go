package framework

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-steward/steward/internal/pki"
)

func TestBitnamiPlaintext(t *testing.T) {
	b := BitnamiEtcd{Namespace: "ns", Name: "etcd", Replicas: 3, Image: "etcd"}
	for _, u := range []string{b.PeerURL("etcd-0"), b.MemberClientURL("etcd-0"), b.ClientURL()} {
		if !strings.HasPrefix(u, "http://") {
			t.Errorf("URL %s of a plaintext source", u)
		}
	}
	pod := b.StatefulSet().Spec.Template.Spec
	c := pod.Containers[0]
	if len(pod.Volumes) != 0 || len(c.VolumeMounts) != 1 || len(c.Ports) != 2 {
		t.Errorf("volumes %v, mounts %v, ports %v: want only the data volume and the two etcd ports", pod.Volumes, c.VolumeMounts, c.Ports)
	}
	if p := c.ReadinessProbe.HTTPGet.Port.String(); p != "client" {
		t.Errorf("readiness probe on %s, want the client port", p)
	}
	for _, e := range c.Env {
		if strings.Contains(e.Value, "https") || strings.Contains(e.Name, "CERT") || e.Name == "ETCD_LISTEN_METRICS_URLS" {
			t.Errorf("env %s=%s in a plaintext source", e.Name, e.Value)
		}
	}
	if _, err := b.TLSSecret(); err == nil {
		t.Error("a plaintext source gave a TLS Secret")
	}
}

func TestBitnamiTLS(t *testing.T) {
	now := time.Now()
	b := BitnamiEtcd{Namespace: "ns", Name: "etcd", Replicas: 5, Image: "etcd"}
	var err error
	if b.TLS, err = NewBitnamiTLS(b, now); err != nil {
		t.Fatal(err)
	}

	// Every URL a client or a peer dials is https, and the member certificate names its host.
	roots := pki.Pool([]*x509.Certificate{b.TLS.CA.Cert})
	urls := []string{b.ClientURL()}
	for _, p := range b.PodNames() {
		urls = append(urls, b.PeerURL(p), b.MemberClientURL(p))
	}
	for _, u := range urls {
		parsed, err := url.Parse(u)
		if err != nil || parsed.Scheme != "https" {
			t.Errorf("URL %s of a TLS source (%v)", u, err)
			continue
		}
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := b.TLS.Member.Cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: parsed.Hostname(),
				KeyUsages: []x509.ExtKeyUsage{usage}, CurrentTime: now}); err != nil {
				t.Errorf("member certificate for %s, usage %v: %v", parsed.Hostname(), usage, err)
			}
		}
	}
	// etcd resolves a connecting peer's names forward: each member's name is spelled out.
	for _, p := range b.PodNames() {
		if !slices.Contains(b.TLS.Member.Cert.DNSNames, b.podHost(p)) {
			t.Errorf("member certificate names %v, not %s", b.TLS.Member.Cert.DNSNames, b.podHost(p))
		}
	}
	if _, err := b.TLS.Client.Cert.Verify(x509.VerifyOptions{Roots: roots,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: now}); err != nil {
		t.Errorf("client certificate: %v", err)
	}

	// The StatefulSet reads the Secret's files on both planes and requires client certificates.
	sec, err := b.TLSSecret()
	if err != nil {
		t.Fatal(err)
	}
	pod := b.StatefulSet().Spec.Template.Spec
	c := pod.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	mounted := map[string]bool{}
	for _, m := range c.VolumeMounts {
		if m.Name == "certs" {
			mounted[m.MountPath] = m.ReadOnly
		}
	}
	for _, name := range []string{"ETCD_CERT_FILE", "ETCD_KEY_FILE", "ETCD_TRUSTED_CA_FILE",
		"ETCD_PEER_CERT_FILE", "ETCD_PEER_KEY_FILE", "ETCD_PEER_TRUSTED_CA_FILE"} {
		dir, file := env[name][:strings.LastIndex(env[name], "/")], env[name][strings.LastIndex(env[name], "/")+1:]
		if _, ok := sec.Data[file]; !ok || !mounted[dir] {
			t.Errorf("%s=%q: file in the Secret %t, directory mounted read-only %t", name, env[name], ok, mounted[dir])
		}
	}
	for _, name := range []string{"ETCD_CLIENT_CERT_AUTH", "ETCD_PEER_CLIENT_CERT_AUTH"} {
		if env[name] != "true" {
			t.Errorf("%s=%q, want true", name, env[name])
		}
	}
	for _, name := range []string{"ETCD_ADVERTISE_CLIENT_URLS", "ETCD_LISTEN_CLIENT_URLS", "ETCD_INITIAL_ADVERTISE_PEER_URLS",
		"ETCD_LISTEN_PEER_URLS", "ETCD_INITIAL_CLUSTER"} {
		if strings.Contains(env[name], "http://") || !strings.Contains(env[name], "https://") {
			t.Errorf("%s=%q, want https URLs only", name, env[name])
		}
	}
	if len(pod.Volumes) != 1 || pod.Volumes[0].Secret == nil || pod.Volumes[0].Secret.SecretName != sec.Name {
		t.Errorf("volumes %+v, want the Secret %s", pod.Volumes, sec.Name)
	}
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if p.HTTPGet.Port.String() != "metrics" || p.HTTPGet.Scheme == corev1.URISchemeHTTPS {
			t.Errorf("probe %+v, want plain HTTP on the metrics port", p.HTTPGet)
		}
	}
	if !strings.HasPrefix(env["ETCD_LISTEN_METRICS_URLS"], "http://") {
		t.Errorf("ETCD_LISTEN_METRICS_URLS=%q", env["ETCD_LISTEN_METRICS_URLS"])
	}

	// What Steward reads from caSecretName is the CA with its key.
	caSecret, err := b.TLS.CASecret("ns", "source-ca")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pki.LoadCA(caSecret.Data[corev1.TLSCertKey], caSecret.Data[corev1.TLSPrivateKeyKey]); err != nil {
		t.Errorf("CA Secret: %v", err)
	}
}

// An application's configuration completes a handshake with a member that requires client
// certificates, dialling the member by its URL's host.
func TestBitnamiTLSHandshake(t *testing.T) {
	b := BitnamiEtcd{Namespace: "ns", Name: "etcd", Replicas: 3}
	tlsm, err := NewBitnamiTLS(b, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b.TLS = tlsm
	server := &tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs:    pki.Pool([]*x509.Certificate{tlsm.CA.Cert}),
		Certificates: []tls.Certificate{{Certificate: [][]byte{tlsm.Member.Cert.Raw}, PrivateKey: tlsm.Member.Key}}}
	u, err := url.Parse(b.MemberClientURL("etcd-2"))
	if err != nil {
		t.Fatal(err)
	}
	client := tlsm.ClientConfig()
	client.ServerName = u.Hostname()
	sc, cc := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- tls.Server(sc, server).Handshake() }()
	if err := tls.Client(cc, client).Handshake(); err != nil {
		t.Fatalf("client handshake: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("server handshake: %v", err)
	}
	_ = sc.Close()
	_ = cc.Close()
}

// TLS clients with plaintext peers: client URLs https with client certificates required, peer
// URLs http with no peer TLS setting at all (etcd would otherwise serve TLS on the peer port).
func TestBitnamiPeersPlaintext(t *testing.T) {
	b := BitnamiEtcd{Namespace: "ns", Name: "etcd", Replicas: 3, Image: "etcd"}
	var err error
	if b.TLS, err = NewBitnamiTLS(b, time.Now()); err != nil {
		t.Fatal(err)
	}
	b.TLS.PeersPlaintext = true
	if !strings.HasPrefix(b.ClientURL(), "https://") || !strings.HasPrefix(b.MemberClientURL("etcd-0"), "https://") ||
		!strings.HasPrefix(b.PeerURL("etcd-0"), "http://") {
		t.Fatalf("client %s, member %s, peer %s", b.ClientURL(), b.MemberClientURL("etcd-0"), b.PeerURL("etcd-0"))
	}
	env := map[string]string{}
	for _, e := range b.StatefulSet().Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	for name, v := range env {
		if strings.HasPrefix(name, "ETCD_PEER_") {
			t.Errorf("peer TLS setting %s=%s on plaintext peers", name, v)
		}
	}
	if env["ETCD_CLIENT_CERT_AUTH"] != "true" || !strings.HasPrefix(env["ETCD_LISTEN_PEER_URLS"], "http://") ||
		!strings.Contains(env["ETCD_INITIAL_CLUSTER"], "=http://") {
		t.Errorf("env %v", env)
	}
}

// A source that admits one certificate name on its peer port: the rule is set only when asked for.
func TestBitnamiPeerAllowedCN(t *testing.T) {
	b := BitnamiEtcd{Namespace: "ns", Name: "etcd", Replicas: 3, Image: "etcd"}
	var err error
	if b.TLS, err = NewBitnamiTLS(b, time.Now()); err != nil {
		t.Fatal(err)
	}
	allowed := func() (string, bool) {
		for _, e := range b.StatefulSet().Spec.Template.Spec.Containers[0].Env {
			if e.Name == "ETCD_PEER_CERT_ALLOWED_CN" {
				return e.Value, true
			}
		}
		return "", false
	}
	if v, ok := allowed(); ok {
		t.Fatalf("ETCD_PEER_CERT_ALLOWED_CN=%s set without being asked for", v)
	}
	b.TLS.PeerAllowedCN = b.TLS.Member.Cert.Subject.CommonName
	if v, ok := allowed(); !ok || v != "etcd" {
		t.Fatalf("ETCD_PEER_CERT_ALLOWED_CN %q (set %t), want the member certificate's name etcd", v, ok)
	}
}
