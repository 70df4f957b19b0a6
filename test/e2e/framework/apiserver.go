package framework

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TCPProxy forwards every connection accepted on 127.0.0.1 to target, dialled anew each time:
// a host process reaches a ClusterIP Service through it (kube-proxy picks a ready member per
// connection) under the name 127.0.0.1, which member server certificates carry. TLS passes
// through untouched, so the client verifies the members itself.
type TCPProxy struct {
	Addr   string
	ln     net.Listener
	target string
	wg     sync.WaitGroup
}

// StartTCPProxy listens until the test ends.
func StartTCPProxy(t testing.TB, target string) *TCPProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &TCPProxy{Addr: ln.Addr().String(), ln: ln, target: target}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { _ = ln.Close(); p.wg.Wait() })
	return p
}

func (p *TCPProxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer func() { _ = in.Close() }()
			out, err := net.DialTimeout("tcp", p.target, 2*time.Second)
			if err != nil {
				return
			}
			defer func() { _ = out.Close() }()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
			go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
			<-done // either side closing ends both
		}()
	}
}

const apiserverToken = "steward-e2e"

// EtcdFiles are what a kube-apiserver reads once, at start: --etcd-cafile, --etcd-certfile,
// --etcd-keyfile.
type EtcdFiles struct{ CA, Cert, Key []byte }

// KubeAPIServer is a kube-apiserver process on the host using an etcd cluster under test as its
// storage. It serves only the test: one static token in system:masters, everything allowed (it
// refuses anonymous requests with AlwaysAllow), no endpoint reconciler (it advertises loopback).
type KubeAPIServer struct {
	URL    string
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartKubeAPIServer writes the files into dir and starts the binary against etcdURL, waiting
// until /readyz answers. prefix keeps its keys apart from anything else in the cluster; extra are
// more flags.
func StartKubeAPIServer(t testing.TB, binary, dir, etcdURL, prefix string, files EtcdFiles, extra ...string) *KubeAPIServer {
	t.Helper()
	if err := writeFiles(dir, files); err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "kube-apiserver-"+strconv.FormatInt(time.Now().Unix(), 10)+".log"))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--etcd-servers=" + etcdURL, "--etcd-prefix=" + prefix}
	if len(files.CA) > 0 { // no files: a plaintext etcd
		args = append(args, "--etcd-cafile="+filepath.Join(dir, "ca.crt"), "--etcd-certfile="+filepath.Join(dir, "tls.crt"),
			"--etcd-keyfile="+filepath.Join(dir, "tls.key"))
	}
	cmd := exec.Command(binary, append(args,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(dir, "serving"), "--service-cluster-ip-range=10.250.0.0/24",
		"--service-account-issuer=https://kube-apiserver.e2e", "--service-account-key-file="+filepath.Join(dir, "sa.key"),
		"--service-account-signing-key-file="+filepath.Join(dir, "sa.key"),
		"--authorization-mode=AlwaysAllow", "--token-auth-file="+filepath.Join(dir, "tokens.csv"),
		"--endpoint-reconciler-type=none", "--enable-priority-and-fairness=false")...)
	cmd.Args = append(cmd.Args, extra...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", binary, err)
	}
	k := &KubeAPIServer{URL: fmt.Sprintf("https://127.0.0.1:%d", port), dir: dir, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = log.Close(); close(k.exited) }()
	t.Cleanup(k.Stop)
	if err := k.waitReady(2 * time.Minute); err != nil {
		t.Fatalf("kube-apiserver not ready (log in %s): %v", log.Name(), err)
	}
	return k
}

// Stop ends the process and waits for it.
func (k *KubeAPIServer) Stop() {
	if k.cmd.Process != nil {
		_ = k.cmd.Process.Signal(os.Interrupt)
	}
	select {
	case <-k.exited:
	case <-time.After(30 * time.Second):
		_ = k.cmd.Process.Kill()
		<-k.exited
	}
}

// Clientset talks to it; requests time out after timeout.
func (k *KubeAPIServer) Clientset(timeout time.Duration) (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(&rest.Config{Host: k.URL, BearerToken: apiserverToken, Timeout: timeout, QPS: 100, Burst: 200,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
}

func (k *KubeAPIServer) waitReady(within time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // its self-signed serving certificate
	deadline := time.Now().Add(within)
	last := errors.New("no answer")
	for time.Now().Before(deadline) {
		select {
		case <-k.exited:
			return fmt.Errorf("exited: %v", k.cmd.ProcessState)
		case <-time.After(500 * time.Millisecond):
		}
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, k.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+apiserverToken)
		resp, err := hc.Do(req)
		if err != nil {
			last = err
			continue
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
		last = fmt.Errorf("/readyz: %s", resp.Status)
	}
	return last
}

func writeFiles(dir string, files EtcdFiles) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalECPrivateKey(key) // SEC1: both service-account key flags read it
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{"ca.crt": files.CA, "tls.crt": files.Cert, "tls.key": files.Key,
		"sa.key":     pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}),
		"tokens.csv": []byte(apiserverToken + ",e2e,e2e,system:masters\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
