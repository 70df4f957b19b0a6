// Package s3test runs a real S3 server for tests: versitygw with its POSIX backend on a loopback
// port and a temporary directory. It is never skipped: a test that needs S3 and cannot find the
// server fails, saying how to build it.
package s3test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/ports"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Binary finds versitygw: $VERSITYGW_BIN, else what hack/toolchain.sh builds
// (_out/bin/versitygw/<version>/versitygw), else _out/bin/versitygw (a `go install` with
// GOBIN=_out/bin).
func Binary() (string, error) {
	if b := os.Getenv("VERSITYGW_BIN"); b != "" {
		if _, err := os.Stat(b); err != nil {
			return "", fmt.Errorf("VERSITYGW_BIN=%s: %w; %s", b, err, buildHint)
		}
		return b, nil
	}
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", "..", "..", "_out", "bin", "versitygw")
	candidates, _ := filepath.Glob(filepath.Join(bin, "v*", "versitygw"))
	candidates = append(candidates, bin)
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && !st.IsDir() {
			return c, nil
		}
	}
	return "", errors.New("no versitygw binary: " + buildHint)
}

const buildHint = "run `hack/toolchain.sh versitygw`, or " +
	"`GOBIN=$PWD/_out/bin go install github.com/versity/versitygw/cmd/versitygw@v1.8.0`, or set VERSITYGW_BIN"

// Server is one running versitygw.
type Server struct {
	// Endpoint is http(s)://127.0.0.1:PORT.
	Endpoint          string
	AccessKey, Secret string
	// Bucket exists, empty, when Start returns.
	Bucket string
	// Dir is the POSIX backend's root: each bucket is a directory, each object a file.
	Dir string
	// CA is the PEM of the CA that signed the server certificate (StartTLS only).
	CA []byte
	// serverName is what the helper's own client verifies the certificate for.
	serverName string

	cmd    *exec.Cmd
	exited chan struct{}
}

// Start runs versitygw over plain HTTP and creates a bucket.
func Start(t testing.TB) *Server { return start(t, nil) }

// StartTLS runs versitygw over HTTPS with the given certificate and key (PEM) and creates a bucket;
// caPEM is what clients should trust.
func StartTLS(t testing.TB, certPEM, keyPEM, caPEM []byte) *Server {
	return start(t, &tlsFiles{cert: certPEM, key: keyPEM, ca: caPEM})
}

type tlsFiles struct{ cert, key, ca []byte }

func start(t testing.TB, tf *tlsFiles) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	s := &Server{AccessKey: "steward-test", Secret: "steward-test-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		Bucket: "backups", Dir: data, exited: make(chan struct{})}
	args := []string{"--access", s.AccessKey, "--secret", s.Secret, "--port", "127.0.0.1:" + strconv.Itoa(port), "--quiet"}
	scheme := "http"
	if tf != nil {
		scheme = "https"
		cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
		for p, b := range map[string][]byte{cert: tf.cert, key: tf.key} {
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		args = append(args, "--cert", cert, "--key", key)
		s.CA = tf.ca
		s.serverName = certHost(t, tf.cert)
	}
	s.Endpoint = fmt.Sprintf("%s://127.0.0.1:%d", scheme, port)
	args = append(args, "posix", data)
	s.cmd = exec.Command(bin, args...)
	logf, err := os.Create(filepath.Join(dir, "versitygw.log"))
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.cmd.Wait(); _ = logf.Close(); close(s.exited) }()
	t.Cleanup(s.Stop)
	s.waitAndCreateBucket(t, logf.Name())
	return s
}

func (s *Server) waitAndCreateBucket(t testing.TB, logName string) {
	t.Helper()
	c, err := s.Client()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = c.MakeBucket(ctx, s.Bucket, minio.MakeBucketOptions{})
		cancel()
		if err == nil {
			return
		}
		select {
		case <-s.exited:
			log, _ := os.ReadFile(logName)
			t.Fatalf("versitygw exited: %v\n%s", err, log)
		default:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logName)
			t.Fatalf("versitygw at %s did not serve within 30s: %v\n%s", s.Endpoint, err, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Client is a minio client as the root user, for looking at the server behind the code under
// test (listing incomplete multipart uploads, say).
func (s *Server) Client() (*minio.Client, error) {
	tr, err := minio.DefaultTransport(s.CA != nil)
	if err != nil {
		return nil, err
	}
	if s.CA != nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(s.CA)
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, ServerName: s.serverName}
	}
	host := strings.TrimPrefix(strings.TrimPrefix(s.Endpoint, "https://"), "http://")
	return minio.New(host, &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.Secret, ""),
		Secure: s.CA != nil, Transport: tr, BucketLookup: minio.BucketLookupPath, Region: "us-east-1", MaxRetries: 1})
}

// certHost is the name a client should expect the certificate for: its first IP address, else
// its first DNS name (a certificate made to mismatch 127.0.0.1 on purpose).
func certHost(t testing.TB, certPEM []byte) string {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("server certificate is not PEM")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.IPAddresses) > 0 {
		return c.IPAddresses[0].String()
	}
	if len(c.DNSNames) > 0 {
		return c.DNSNames[0]
	}
	return ""
}

// Stop kills the server (idempotent; also run at cleanup).
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// FreePort returns a loopback port nobody listens on (for "endpoint unreachable" tests too).
func FreePort(t testing.TB) int { return freePort(t) }

func freePort(t testing.TB) int {
	p, err := ports.Free(1)
	if err != nil {
		t.Fatal(err)
	}
	return p[0]
}
