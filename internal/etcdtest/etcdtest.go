// Package etcdtest runs real etcd server processes on loopback for tests: the binaries the project
// builds from source (hack/toolchain.sh), never a fake.
package etcdtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-steward/steward/internal/ports"
)

// Binary finds the etcd server: $ETCD_BIN, else the envtest assets' etcd, else _out/envtest/etcd.
func Binary() (string, error) {
	if b := os.Getenv("ETCD_BIN"); b != "" {
		return b, nil
	}
	candidates := []string{filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "etcd")}
	_, file, _, _ := runtime.Caller(0)
	candidates = append(candidates, filepath.Join(filepath.Dir(file), "..", "..", "_out", "envtest", "etcd"))
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && !st.IsDir() {
			return c, nil
		}
	}
	return "", fmt.Errorf("no etcd binary: run `make test` (hack/toolchain.sh envtest builds it) or set ETCD_BIN")
}

// Member is one etcd process.
type Member struct {
	Name                        string
	PeerURL, ClientURL, Metrics string
	dir                         string
	cmd                         *exec.Cmd
	exited                      chan struct{}
}

// Cluster is a set of members started together, plus any added later.
type Cluster struct {
	t       testing.TB
	bin     string
	token   string
	Members []*Member
}

// FreePort reserves a loopback port for this test process (see package ports).
func FreePort(t testing.TB) int {
	p, err := ports.Free(1)
	if err != nil {
		t.Fatal(err)
	}
	return p[0]
}

func (c *Cluster) newMember(name string) *Member {
	return &Member{
		Name:      name,
		PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", FreePort(c.t)),
		ClientURL: fmt.Sprintf("http://127.0.0.1:%d", FreePort(c.t)),
		Metrics:   fmt.Sprintf("http://127.0.0.1:%d", FreePort(c.t)),
		dir:       filepath.Join(c.t.TempDir(), name),
	}
}

// Start starts an n-member cluster and waits until every member is healthy.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, bin: bin, token: fmt.Sprintf("test-%d", time.Now().UnixNano())}
	var initial []string
	for i := range n {
		m := c.newMember(fmt.Sprintf("m%d", i))
		c.Members = append(c.Members, m)
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	for _, m := range c.Members {
		c.run(m, strings.Join(initial, ","), "new")
	}
	t.Cleanup(c.Stop)
	for _, m := range c.Members {
		c.WaitHealthy(m)
	}
	return c
}

// NewMember prepares a member that is not started: the caller adds it to etcd first (as a learner,
// say), then starts it with Join.
func (c *Cluster) NewMember(name string) *Member {
	m := c.newMember(name)
	c.Members = append(c.Members, m)
	return m
}

// Join starts a member prepared by NewMember with --initial-cluster-state=existing.
func (c *Cluster) Join(m *Member, initialCluster string) { c.run(m, initialCluster, "existing") }

func (c *Cluster) run(m *Member, initialCluster, state string) {
	m.cmd = exec.Command(c.bin,
		"--name="+m.Name, "--data-dir="+m.dir,
		"--listen-peer-urls="+m.PeerURL, "--initial-advertise-peer-urls="+m.PeerURL,
		"--listen-client-urls="+m.ClientURL, "--advertise-client-urls="+m.ClientURL,
		"--listen-metrics-urls="+m.Metrics,
		"--initial-cluster="+initialCluster, "--initial-cluster-state="+state,
		"--initial-cluster-token="+c.token, "--log-level=error",
		// Short timings keep elections and leader transfers fast on a loaded test machine.
		"--heartbeat-interval=50", "--election-timeout=500")
	logf, err := os.Create(m.dir + ".log")
	if err != nil {
		c.t.Fatal(err)
	}
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	if err := m.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	m.exited = make(chan struct{})
	go func() { _ = m.cmd.Wait(); _ = logf.Close(); close(m.exited) }()
}

// Restart starts a killed member again on its own data, at the same addresses.
func (c *Cluster) Restart(m *Member) { c.run(m, m.Name+"="+m.PeerURL, "existing") }

// Kill stops a member abruptly (SIGKILL), keeping its data directory.
func (c *Cluster) Kill(m *Member) {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	_ = m.cmd.Process.Kill()
	<-m.exited
	m.cmd = nil
}

// Stop kills every member.
func (c *Cluster) Stop() {
	for _, m := range c.Members {
		c.Kill(m)
	}
}

// WaitHealthy waits until the member answers /health (serializable, so learners count).
func (c *Cluster) WaitHealthy(m *Member) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(m.Metrics + "/health?serializable=true")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	log, _ := os.ReadFile(m.dir + ".log")
	c.t.Fatalf("etcd member %s not healthy within 30s; log tail:\n%s", m.Name, tail(string(log), 2000))
}

// ClientURLs of the members started so far.
func (c *Cluster) ClientURLs() []string {
	var out []string
	for _, m := range c.Members {
		if m.cmd != nil {
			out = append(out, m.ClientURL)
		}
	}
	return out
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// RaiseAlarm raises an alarm (NOSPACE, CORRUPT) on a member through etcd's maintenance API, as
// etcd itself does when the quota fills, and returns the server's version. Filling a real quota
// would take seconds per test; the alarm is the same replicated fact either way.
func (c *Cluster) RaiseAlarm(ctx context.Context, m *Member, alarm string) string {
	c.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	st, err := cli.Status(ctx, m.ClientURL)
	if err != nil {
		c.t.Fatal(err)
	}
	_, err = etcdserverpb.NewMaintenanceClient(cli.ActiveConnection()).Alarm(ctx, &etcdserverpb.AlarmRequest{
		Action: etcdserverpb.AlarmRequest_ACTIVATE, MemberID: st.Header.MemberId,
		Alarm: etcdserverpb.AlarmType(etcdserverpb.AlarmType_value[alarm]),
	})
	if err != nil {
		c.t.Fatalf("raising %s on %s: %v", alarm, m.Name, err)
	}
	return st.Version
}

// DataDir is the member's --data-dir.
func (m *Member) DataDir() string { return m.dir }
