package datacheck

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-steward/steward/internal/etcdtest"
	"github.com/etcd-steward/steward/internal/evidence"
	"github.com/etcd-steward/steward/internal/pki"
)

// port is a loopback port reserved for this test process (etcdtest.FreePort), as a string.
func port(t *testing.T) string { return fmt.Sprint(etcdtest.FreePort(t)) }

// TestRunEtcdNamesAPeerRefusal runs a joining member through the wrapper against a real etcd whose
// peer port admits one certificate name only (--peer-cert-allowed-cn, as an adopted source may):
// etcd exits, and the wrapper's exit code and termination message say that a peer refused the
// member's certificate, which the kubelet's 2 KiB of etcd's log would not.
func TestRunEtcdNamesAPeerRefusal(t *testing.T) {
	bin, err := etcdtest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	now := time.Now()
	ca, err := pki.NewCA("source", "db", now.Add(-time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile := write("ca.crt", ca.CertPEM())
	peerFiles := func(cn string) []string {
		l, err := ca.Issue(cn, pki.Peer, []string{"localhost"}, now.Add(-time.Minute), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		m, err := l.Material()
		if err != nil {
			t.Fatal(err)
		}
		return []string{"--peer-client-cert-auth", "--peer-trusted-ca-file=" + caFile,
			"--peer-cert-file=" + write(cn+".crt", m.Cert), "--peer-key-file=" + write(cn+".key", m.Key)}
	}
	srcPeer, srcClient := "https://localhost:"+port(t), "http://127.0.0.1:"+port(t)
	src := exec.Command(bin, append([]string{"--name=source-0", "--data-dir=" + filepath.Join(dir, "source"),
		"--listen-peer-urls=" + strings.Replace(srcPeer, "localhost", "127.0.0.1", 1), "--initial-advertise-peer-urls=" + srcPeer,
		"--listen-client-urls=" + srcClient, "--advertise-client-urls=" + srcClient,
		"--initial-cluster=source-0=" + srcPeer, "--peer-cert-allowed-cn=source-peer", "--log-level=error"},
		peerFiles("source-peer")...)...)
	var srcLog bytes.Buffer
	src.Stdout, src.Stderr = &srcLog, &srcLog
	if err := src.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Process.Kill(); _ = src.Wait() })

	c, err := clientv3.New(clientv3.Config{Endpoints: []string{srcClient}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	learnerPeer := "https://localhost:" + port(t)
	for {
		if _, err = c.MemberAddAsLearner(ctx, []string{learnerPeer}); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("adding the learner: %v\n%s", err, srcLog.String())
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The learner, as Steward's Pod runs it: through the wrapper, a peer certificate of the same CA
	// under another name, info-level logging (etcd's default and Steward's).
	learnerClient := "http://127.0.0.1:" + port(t)
	termLog := filepath.Join(dir, "termination-log")
	args := append([]string{"--data-dir", filepath.Join(dir, "learner"), "--termination-log", termLog, "--",
		bin, "--name=adopted-0", "--data-dir=" + filepath.Join(dir, "learner"),
		"--listen-peer-urls=" + strings.Replace(learnerPeer, "localhost", "127.0.0.1", 1), "--initial-advertise-peer-urls=" + learnerPeer,
		"--listen-client-urls=" + learnerClient, "--advertise-client-urls=" + learnerClient,
		"--initial-cluster=source-0=" + srcPeer + ",adopted-0=" + learnerPeer, "--initial-cluster-state=existing"},
		peerFiles("adopted-peer")...)
	var out bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- Main(args, &out) }()
	select {
	case code := <-done:
		if code != ExitJoinRefused {
			t.Fatalf("exit code %d, want %d (ExitJoinRefused); the wrapper said %q", code, ExitJoinRefused, out.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("the refused member's etcd did not exit within a minute")
	}
	msg, err := os.ReadFile(termLog)
	if err != nil {
		t.Fatal(err)
	}
	v := RefusedJoin(ExitJoinRefused, string(msg))
	if v == "" || !evidence.PeerRefusedCertificate(v) || !strings.Contains(v, srcPeer) {
		t.Fatalf("termination message %q: not read as the source's peer %s refusing the certificate", msg, srcPeer)
	}
	t.Logf("termination message: %s", msg)
}
