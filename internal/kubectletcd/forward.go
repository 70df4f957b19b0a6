package kubectletcd

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
)

// Forwarder opens a local tunnel to a Pod's port and returns the local host:port.
type Forwarder interface {
	Forward(ctx context.Context, namespace, pod string, port int) (addr string, stop func(), err error)
}

// kubectlForwarder runs `kubectl port-forward`. A kubectl plugin always has kubectl at hand, and
// this keeps client-go's SPDY and WebSocket stacks (modules the project does not otherwise need)
// out of the build.
type kubectlForwarder struct{ args []string }

var forwardingLine = regexp.MustCompile(`Forwarding from (127\.0\.0\.1:\d+) ->`)

func (f kubectlForwarder) Forward(ctx context.Context, namespace, pod string, port int) (string, func(), error) {
	args := append(append([]string{}, f.args...), "port-forward", "--namespace", namespace, "--address", "127.0.0.1",
		"pod/"+pod, fmt.Sprintf(":%d", port))
	// Not CommandContext: the tunnel must outlive the setup deadline below.
	cmd := exec.Command("kubectl", args...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("port-forward needs kubectl on PATH: %w", err)
	}
	stop := func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := forwardingLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		_, _ = io.Copy(io.Discard, out) // kubectl logs each connection; keep its pipe drained
		close(found)
	}()
	select {
	case addr, ok := <-found:
		if ok {
			return addr, stop, nil
		}
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	stop()
	return "", nil, fmt.Errorf("kubectl port-forward to pod %s/%s port %d: %s", namespace, pod, port, bytes.TrimSpace(stderr.Bytes()))
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

func (env *Env) forwarder() Forwarder {
	if env.Forward != nil {
		return env.Forward
	}
	return kubectlForwarder{args: env.KubectlArgs}
}

// clientMaterial is the client certificate the plugin presents: the application Secret Steward
// writes, or with source Secret the user's own client-plane Secret (it carries client auth); with
// etcd auth declared, the backups' certificate once Steward wrote it (root: snapshot, defragment
// and alarm disarm need root, and the shared client's user is not).
type clientMaterial struct {
	secret       string
	ca, crt, key []byte
	tlsOff       bool
	scheme       string
}

func clientSecretName(ec *stewardv1.EtcdCluster) string {
	if t := ec.Spec.TLS; t != nil && t.Client.Source == stewardv1.TLSSourceSecret && t.Client.SecretName != "" {
		return t.Client.SecretName
	}
	return resources.ClientTLSSecretName(ec.Name)
}

func loadClientMaterial(ctx context.Context, env *Env, ec *stewardv1.EtcdCluster) (*clientMaterial, error) {
	m := &clientMaterial{scheme: resources.Scheme(ec)}
	if !ec.TLSEnabled() {
		m.tlsOff = true
		return m, nil
	}
	m.secret = clientSecretName(ec)
	var s corev1.Secret
	if root := resources.BackupTLSSecretName(ec.Name); resources.ServesCRL(ec) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: env.Namespace, Name: root}, &s)
		if err == nil {
			m.secret = root
		} else if !apierrors.IsNotFound(err) {
			return nil, apiError(err, "get", "secrets", env.Namespace, root)
		}
	}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: env.Namespace, Name: m.secret}, &s); err != nil {
		return nil, apiError(err, "get", "secrets", env.Namespace, m.secret)
	}
	m.ca, m.crt, m.key = s.Data["ca.crt"], s.Data["tls.crt"], s.Data["tls.key"]
	if len(m.ca) == 0 || len(m.crt) == 0 || len(m.key) == 0 {
		return nil, fmt.Errorf("secret %q lacks ca.crt, tls.crt or tls.key", m.secret)
	}
	return m, nil
}

// tlsConfig verifies the member by its stable DNS name, which every member leaf carries whatever
// the TLS source, though the connection goes to a local port.
func (m *clientMaterial) tlsConfig(ec *stewardv1.EtcdCluster, member string) (*tls.Config, error) {
	if m.tlsOff {
		return nil, nil
	}
	pair, err := tls.X509KeyPair(m.crt, m.key)
	if err != nil {
		return nil, fmt.Errorf("secret %q: %w", m.secret, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(m.ca) {
		return nil, fmt.Errorf("secret %q: ca.crt holds no certificate", m.secret)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS12,
		ServerName: resources.MemberHost(ec.Name, ec.Namespace, member)}, nil
}

// writeFiles puts the material into a private directory for etcdctl; the caller removes it.
func (m *clientMaterial) writeFiles() (dir string, err error) {
	dir, err = os.MkdirTemp("", "kubectl-etcd-")
	if err != nil {
		return "", err
	}
	for name, data := range map[string][]byte{"ca.crt": m.ca, "tls.crt": m.crt, "tls.key": m.key} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			_ = os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}
