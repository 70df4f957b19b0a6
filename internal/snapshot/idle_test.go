package snapshot

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// freezingProxy forwards TCP to target, but stops passing server bytes to the client after
// limit bytes: a member that hangs in the middle of a snapshot stream.
func freezingProxy(t *testing.T, target string, limit int64) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	t.Cleanup(func() {
		close(done)
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	var sent int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			go func() { _, _ = io.Copy(s, c) }()
			go func() {
				buf := make([]byte, 4096)
				for {
					n, err := s.Read(buf)
					mu.Lock()
					sent += int64(n)
					frozen := sent > limit
					mu.Unlock()
					if frozen {
						<-done // hold the bytes: the member "hangs"
						return
					}
					if _, werr := c.Write(buf[:n]); werr != nil || err != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + l.Addr().String()
}

// A member that stops sending mid-snapshot fails the save after the idle timeout, and nothing
// is stored.
func TestSaveIdleTimeout(t *testing.T) {
	ctx := tctx(t)
	c, cli := startEtcd(t)
	fill(t, cli, "k", 200, 20_000) // ~4 MiB
	proxy := freezingProxy(t, strings.TrimPrefix(c.Members[0].ClientURL, "http://"), 1<<20)
	store := volume(t)
	opts := saveOpts(CompressionZstd)
	opts.IdleTimeout = time.Second
	start := time.Now()
	_, err := Save(ctx, clientFor(t, proxy), store, opts)
	if err == nil || !strings.Contains(err.Error(), "etcd stopped sending the snapshot for 1s") || time.Since(start) > 15*time.Second {
		t.Errorf("Save through a frozen stream: %v after %s", err, time.Since(start))
	}
	if list, _ := store.List(ctx, ""); len(list) != 0 {
		t.Errorf("a failed save stored %s", list[0].Key)
	}
}
