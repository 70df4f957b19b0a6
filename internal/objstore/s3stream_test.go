package objstore

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/objstore/s3test"
)

// A stream's next part is read while the previous one uploads: with the first part's upload held
// by a proxy, the Put still reads the second part to its end. Uploading one part at a time (the
// Put before), the reader waited for the held upload, which the proxy let go only after 5 s.
func TestS3StreamReadsAheadWhilePartsUpload(t *testing.T) {
	ctx := tctx(t)
	srv := s3test.Start(t)
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target) // keeps the Host the request was signed for
	secondRead := make(chan struct{})
	var overlapped atomic.Bool
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "1" {
			select {
			case <-secondRead:
				overlapped.Store(true)
			case <-time.After(5 * time.Second):
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	s := s3Store(t, srv, func(c *S3Config) { c.Endpoint = front.URL })

	// 20 MiB of unknown length: parts of 8, 8 and 4 MiB; the signal once the second part is read.
	r := &signalAt{r: &failingReader{left: 20 << 20, err: io.EOF}, at: 16 << 20, ch: secondRead}
	info, err := s.Put(ctx, "ns/demo/b1/snapshot.db.zst", r, nil)
	if err != nil || info.Size != 20<<20 || !strings.HasSuffix(info.ETag, "-3") {
		t.Fatalf("Put = %+v, %v (want 20 MiB in 3 parts)", info, err)
	}
	if !overlapped.Load() {
		t.Error("the second part was read only after the first one's upload was let go: parts were read and uploaded in turn")
	}
}

// signalAt closes ch once at bytes were read from it.
type signalAt struct {
	r    io.Reader
	n    int64
	at   int64
	ch   chan struct{}
	once sync.Once
}

func (s *signalAt) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if s.n += int64(n); s.n >= s.at {
		s.once.Do(func() { close(s.ch) })
	}
	return n, err
}
