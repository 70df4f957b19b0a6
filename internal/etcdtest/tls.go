package etcdtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// StartTLS runs one etcd member that serves its client port with mutual TLS, from the files in
// dir (ca.crt, server.crt, server.key), and returns its client URL once it listens. The process
// is killed when the test ends; its log is dir/etcd.log. extra are more etcd flags
// ("--client-crl-file=..."), after the ones above so that they win a repeat.
func StartTLS(t testing.TB, bin, dir string, extra ...string) string {
	t.Helper()
	ports := make([]int, 3)
	for i := range ports {
		ports[i] = FreePort(t)
	}
	url, peer := fmt.Sprintf("https://127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	args := []string{"--name=m0", "--data-dir=" + filepath.Join(dir, "data"),
		"--listen-client-urls=" + url, "--advertise-client-urls=" + url,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer, "--initial-cluster=m0=" + peer,
		fmt.Sprintf("--listen-metrics-urls=http://127.0.0.1:%d", ports[2]), "--log-level=error",
		"--client-cert-auth", "--trusted-ca-file=" + filepath.Join(dir, "ca.crt"),
		"--cert-file=" + filepath.Join(dir, "server.crt"), "--key-file=" + filepath.Join(dir, "server.key")}
	cmd := exec.Command(bin, append(args, extra...)...)
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = logf.Close() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", ports[2]), time.Second)
		if err == nil {
			_ = c.Close()
			return url
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("etcd with TLS did not start: %v\n%s", err, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
