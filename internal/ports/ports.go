// Package ports hands out loopback TCP ports for processes Steward starts next to others on one
// host: test etcds, the verify step's temporary etcd, the S3 test server.
//
// A port that was free a moment ago is not enough. Test packages run in parallel processes: when
// one test kills its etcd, another process could pick the freed port and start its own etcd there,
// and the first test then talks to a stranger (a "member down" backup succeeded against another
// test's m0 on CI). So every port handed out is also reserved for the life of the process with a
// lock file that other processes respect, and ports come from below Linux's ephemeral range
// (32768-60999), where the kernel never puts outgoing connections.
package ports

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// Range is where ports come from.
const (
	Low  = 20000
	High = 32000 // exclusive
)

var (
	mu   sync.Mutex
	held = map[int]*os.File{} // locks kept open until the process exits
)

// Free returns n loopback ports nobody listens on, reserved against every other process that uses
// this package, until this process exits.
func Free(n int) ([]int, error) { return pick(Low, High, n) }

func pick(lo, hi, n int) ([]int, error) {
	dir := filepath.Join(os.TempDir(), "steward-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		dir = "" // a read-only /tmp: fall back to the listen check alone
	}
	mu.Lock()
	defer mu.Unlock()
	var out []int
	for tries := 0; len(out) < n && tries < 20*(hi-lo)+200; tries++ {
		p := lo + rand.IntN(hi-lo)
		if _, taken := held[p]; taken {
			continue
		}
		lock, ok := reserve(dir, p)
		if !ok {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			if lock != nil {
				_ = lock.Close()
			}
			continue
		}
		_ = l.Close()
		held[p] = lock
		out = append(out, p)
	}
	if len(out) < n {
		return nil, fmt.Errorf("only %d of %d free loopback ports in %d-%d", len(out), n, lo, hi-1)
	}
	return out, nil
}

// reserve takes the port's lock file; a nil file with ok means locks are unavailable here.
func reserve(dir string, p int) (*os.File, bool) {
	if dir == "" {
		return nil, true
	}
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprint(p)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, false // another user's lock, say: not ours to take
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, false
	}
	return f, true
}
