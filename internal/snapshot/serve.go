package snapshot

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/etcd-steward/steward/internal/ports"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// serve starts etcd on the restored data directory, isolated on loopback (no peers, the member list
// holds only itself; a client listener of its own TLS read as root: drillTLS), waits until it answers a linearizable read, and returns the
// revision it serves and how many keys it holds, after handing a client to serving (the
// point-in-time drill compares the keyspace). The process is stopped before returning.
func (d *drill) serve(ctx context.Context, data, peer, client string, serving func(*clientv3.Client)) (rev, keys int64, err error) {
	logPath := filepath.Join(d.dir, "etcd.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = logf.Close() }()
	tlsFiles, err := newDrillTLS(d.dir, time.Now())
	if err != nil {
		return 0, 0, err
	}
	cmd := exec.Command(d.opts.Etcd, append([]string{"--name=verify", "--data-dir=" + data,
		"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer, "--initial-cluster=verify=" + peer,
		"--initial-cluster-token=steward-verify", "--log-level=warn",
		// A throwaway member: no fsync, and etcd's largest recommended quota, so that a large
		// snapshot does not start with a NOSPACE alarm.
		"--unsafe-no-fsync", "--quota-backend-bytes=8589934592"}, tlsFiles.args()...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return 0, 0, fmt.Errorf("starting etcd: %w", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer stop(cmd, exited)

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
		TLS: tlsFiles.client})
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = cli.Close() }()
	deadline := time.Now().Add(d.opts.StartTimeout)
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := cli.Get(rctx, "\x00", clientv3.WithFromKey(), clientv3.WithCountOnly())
		cancel()
		if err == nil {
			serving(cli)
			return resp.Header.Revision, resp.Count, nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(logPath)
			return 0, 0, fmt.Errorf("etcd exited on the restored data (%w): %s", waitErr, tail(string(log), 1500))
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			return 0, 0, fmt.Errorf("etcd on the restored data did not serve a linearizable read within %s (%w): %s", d.opts.StartTimeout, err, tail(string(log), 1500))
		}
	}
}

// stop ends etcd with SIGTERM, then SIGKILL after 10 s.
func stop(cmd *exec.Cmd, exited <-chan struct{}) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// freePorts returns n loopback ports reserved for this process (see package ports); nil if none.
func freePorts(n int) []int {
	p, err := ports.Free(n)
	if err != nil {
		return nil
	}
	return p
}
