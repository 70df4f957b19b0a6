package objstore

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/objstore/s3test"
)

// stallingBody passes the first n bytes of a response body, then blocks until the test ends: a
// store (or a network path to it) that keeps the connection open and sends nothing more.
type stallingBody struct {
	io.ReadCloser
	n    int
	done <-chan struct{}
}

func (b *stallingBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		<-b.done
		return 0, io.ErrUnexpectedEOF
	}
	if len(p) > b.n {
		p = p[:b.n]
	}
	n, err := b.ReadCloser.Read(p)
	b.n -= n
	return n, err
}

// A read from a store that stalls mid-object fails after ReadStallTimeout, saying so, instead of
// waiting for the command's whole timeout (a restore's fetch: an hour, its Pod PodInitializing).
func TestS3ReadStallFails(t *testing.T) {
	ctx := tctx(t)
	srv := s3test.Start(t)
	direct := s3Store(t, srv, nil)
	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	if _, err := direct.Put(ctx, "big", bytes.NewReader(data), nil); err != nil {
		t.Fatal(err)
	}

	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		if r.Request.Method == http.MethodGet && strings.HasSuffix(r.Request.URL.Path, "/big") {
			r.Body = &stallingBody{ReadCloser: r.Body, n: 100 << 10, done: done}
		}
		return nil
	}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	t.Cleanup(func() { close(done) })

	s := s3Store(t, srv, func(c *S3Config) {
		c.Endpoint, c.CABundle, c.ReadStallTimeout = front.URL, nil, 500*time.Millisecond
	})
	start := time.Now()
	rc, _, err := s.Get(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	got, err := io.ReadAll(rc)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "sent nothing for 500ms") {
		t.Fatalf("read %d of %d bytes in %s: error %v, want one saying the store stalled", len(got), len(data), took, err)
	}
	if took > 10*time.Second {
		t.Errorf("the stalled read failed after %s, want about 0.5 s", took)
	}
	if len(got) == 0 || len(got) > 100<<10 {
		t.Errorf("read %d bytes before the stall, want some of the %d sent", len(got), 100<<10)
	}
	t.Logf("stalled read failed after %s with %d bytes: %v", took.Round(time.Millisecond), len(got), err)

	// A slow consumer is not a stall: the guard counts only the time a Read waits for the store.
	slow := s3Store(t, srv, func(c *S3Config) { c.ReadStallTimeout = 200 * time.Millisecond })
	rc2, _, err := slow.Get(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc2.Close() }()
	buf := make([]byte, 256<<10)
	total := 0
	for {
		n, err := rc2.Read(buf)
		total += n
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("a slow reader's read failed after %d bytes: %v", total, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if total != len(data) {
		t.Errorf("slow reader read %d bytes, want %d", total, len(data))
	}
}
