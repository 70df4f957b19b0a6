package objstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/etcd-steward/steward/internal/objstore/s3test"
)

func s3Store(t *testing.T, srv *s3test.Server, mutate func(*S3Config)) *S3 {
	t.Helper()
	cfg := S3Config{Endpoint: srv.Endpoint, Bucket: srv.Bucket, Prefix: "steward", Region: "us-east-1",
		ForcePathStyle: true, AccessKeyID: srv.AccessKey, SecretAccessKey: srv.Secret, CABundle: srv.CA, MaxRetries: 2}
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := NewS3(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// onlyReader hides any Seek or WriterTo, so the upload streams as a snapshot does.
type onlyReader struct{ io.Reader }

func TestS3RoundTrip(t *testing.T) {
	ctx := tctx(t)
	srv := s3test.Start(t)
	s := s3Store(t, srv, nil)
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
	// 20 MiB: three parts of 8 MiB, the last one short.
	data := make([]byte, 20<<20)
	_, _ = io.ReadFull(&failingReader{left: int64(len(data))}, data)
	info, err := s.Put(ctx, "ns/demo/b1/snapshot.db.zst", onlyReader{bytes.NewReader(data)}, map[string]string{"compression": "zstd", "cluster": "ns/demo"})
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != int64(len(data)) {
		t.Errorf("Put size %d, want %d", info.Size, len(data))
	}
	if _, err := s.Put(ctx, "ns/demo/b1/manifest.json", strings.NewReader("{}"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "ns/demo/b2/manifest.json", strings.NewReader("{}"), nil); err != nil {
		t.Fatal(err)
	}

	rc, got, err := s.Get(ctx, "ns/demo/b1/snapshot.db.zst")
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := io.Copy(h, rc)
	_ = rc.Close()
	if err != nil || n != int64(len(data)) || !bytes.Equal(h.Sum(nil), sha(data)) {
		t.Fatalf("Get: %v, %d bytes, same content %v", err, n, bytes.Equal(h.Sum(nil), sha(data)))
	}
	if got.Metadata["compression"] != "zstd" || got.Metadata["cluster"] != "ns/demo" || got.Size != int64(len(data)) {
		t.Errorf("Get info = %+v", got)
	}
	if st, err := s.Stat(ctx, "ns/demo/b1/snapshot.db.zst"); err != nil || st.Metadata["compression"] != "zstd" || st.ETag == "" {
		t.Errorf("Stat = %+v, %v", st, err)
	}
	if loc := s.Location("ns/demo/b1/manifest.json"); loc != "s3://backups/steward/ns/demo/b1/manifest.json" {
		t.Errorf("Location = %s", loc)
	}
	// The prefix is a directory in the bucket; keys come back without it.
	list, err := s.List(ctx, "ns/demo/b1/")
	if err != nil || keysOf(list) != "ns/demo/b1/manifest.json,ns/demo/b1/snapshot.db.zst" {
		t.Errorf("List(b1/) = %s, %v", keysOf(list), err)
	}
	if list, err := s.List(ctx, "ns/demo/"); err != nil || len(list) != 3 {
		t.Errorf("List(ns/demo/) = %s, %v", keysOf(list), err)
	}

	if err := s.Delete(ctx, "ns/demo/b1/snapshot.db.zst"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "ns/demo/b1/snapshot.db.zst"); err != nil {
		t.Errorf("deleting a missing object: %v", err)
	}
	if _, err := s.Stat(ctx, "ns/demo/b1/snapshot.db.zst"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Stat after Delete = %v, want ErrNotFound", err)
	}
	if _, _, err := s.Get(ctx, "ns/demo/none"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of a missing object = %v, want ErrNotFound", err)
	}
}

func sha(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

// An upload whose reader fails after some parts were sent leaves no object and no pending
// multipart upload (whose parts would be billed and never seen).
func TestS3AbortedUploadLeavesNothing(t *testing.T) {
	ctx := tctx(t)
	srv := s3test.Start(t)
	s := s3Store(t, srv, nil)
	_, err := s.Put(ctx, "ns/demo/b1/snapshot.db.zst", &failingReader{left: 19 << 20, err: errBroken}, nil)
	if !errors.Is(err, errBroken) {
		t.Fatalf("Put = %v, want the reader's error", err)
	}
	if _, err := s.Stat(ctx, "ns/demo/b1/snapshot.db.zst"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Stat after a failed upload = %v, want ErrNotFound", err)
	}
	if list, err := s.List(ctx, ""); err != nil || len(list) != 0 {
		t.Errorf("List after a failed upload = %s, %v", keysOf(list), err)
	}
	c, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	for u := range c.ListIncompleteUploads(ctx, srv.Bucket, "", true) {
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		t.Errorf("multipart upload left behind: %s (%s)", u.Key, u.UploadID)
	}
	// The upload really was multipart: with a reader that does not fail, the same stream works
	// and takes three parts.
	info, err := s.Put(ctx, "ns/demo/b1/snapshot.db.zst", &failingReader{left: 19 << 20, err: io.EOF}, nil)
	if err != nil || info.Size != 19<<20 || !strings.HasSuffix(info.ETag, "-3") {
		t.Errorf("a complete upload: %+v, %v (want a 3-part ETag)", info, err)
	}
}

func TestS3Errors(t *testing.T) {
	ctx := tctx(t)
	srv := s3test.Start(t)

	t.Run("wrong secret", func(t *testing.T) {
		wrong := "not-the-secret-" + srv.Secret
		s := s3Store(t, srv, func(c *S3Config) { c.SecretAccessKey = wrong })
		for name, err := range map[string]error{"Check": s.Check(ctx), "Put": putErr(ctx, s)} {
			msg := fmt.Sprint(err)
			if !strings.Contains(msg, "S3 refused the credentials (SignatureDoesNotMatch)") || !strings.Contains(msg, "check the Secret") {
				t.Errorf("%s: %s", name, msg)
			}
			if strings.Contains(msg, wrong) {
				t.Errorf("%s: the message leaks a credential: %s", name, msg)
			}
		}
	})
	t.Run("session token the server does not know", func(t *testing.T) {
		s := s3Store(t, srv, func(c *S3Config) { c.SessionToken = "session-token-value" })
		if msg := fmt.Sprint(s.Check(ctx)); !strings.Contains(msg, "S3 refused the credentials (InvalidToken)") || strings.Contains(msg, "session-token-value") {
			t.Errorf("Check = %s", msg)
		}
	})
	t.Run("unknown access key", func(t *testing.T) {
		s := s3Store(t, srv, func(c *S3Config) { c.AccessKeyID = "nobody" })
		// versitygw says XAdminUserNotFound where AWS says InvalidAccessKeyId; both mean this.
		if err := s.Check(ctx); !strings.Contains(fmt.Sprint(err), "S3 refused the credentials (") {
			t.Errorf("Check = %v", err)
		}
	})
	t.Run("missing bucket", func(t *testing.T) {
		s := s3Store(t, srv, func(c *S3Config) { c.Bucket = "no-such-bucket" })
		want := "bucket no-such-bucket does not exist at " + srv.Endpoint
		for name, err := range map[string]error{"Check": s.Check(ctx), "Put": putErr(ctx, s)} {
			if !strings.Contains(fmt.Sprint(err), want) {
				t.Errorf("%s = %v, want %q", name, err, want)
			}
		}
	})
	t.Run("closed port", func(t *testing.T) {
		endpoint := fmt.Sprintf("http://127.0.0.1:%d", s3test.FreePort(t))
		s := s3Store(t, srv, func(c *S3Config) { c.Endpoint = endpoint })
		for name, err := range map[string]error{"Check": s.Check(ctx), "Put": putErr(ctx, s)} {
			msg := fmt.Sprint(err)
			if !strings.Contains(msg, "cannot reach S3 endpoint "+endpoint+": ") || !strings.Contains(msg, "connection refused") {
				t.Errorf("%s = %s", name, msg)
			}
		}
	})
	t.Run("not a URL", func(t *testing.T) {
		for _, ep := range []string{"s3.amazonaws.com", "ftp://x", "https://user:pw@host/", "https://host/path"} {
			_, err := NewS3(S3Config{Endpoint: ep, Bucket: "b"})
			if err == nil || strings.Contains(err.Error(), "pw") {
				t.Errorf("NewS3(%q) = %v", ep, err)
			}
		}
	})
}

func putErr(ctx context.Context, s *S3) error {
	_, err := s.Put(ctx, "k", strings.NewReader("x"), nil)
	return err
}

// A server certificate from a private CA is refused with a message that says to give the CA
// bundle, and accepted with it; a plain-HTTP server behind an https:// URL is named as such.
func TestS3TLSTrust(t *testing.T) {
	ctx := tctx(t)
	certs := s3test.NewCerts(t, []net.IP{net.ParseIP("127.0.0.1")}, nil)
	srv := s3test.StartTLS(t, certs.Cert, certs.Key, certs.CA)

	untrusting := s3Store(t, srv, func(c *S3Config) { c.CABundle = nil })
	if err := untrusting.Check(ctx); !strings.Contains(fmt.Sprint(err), "signed by an unknown authority") || !strings.Contains(fmt.Sprint(err), "--s3-ca-file") {
		t.Errorf("without the CA bundle: %v", err)
	}
	trusting := s3Store(t, srv, nil)
	if _, err := trusting.Put(ctx, "x", strings.NewReader("over TLS"), nil); err != nil {
		t.Errorf("with the CA bundle: %v", err)
	}
	if _, err := NewS3(S3Config{Endpoint: srv.Endpoint, Bucket: "b", CABundle: []byte("not PEM")}); err == nil {
		t.Error("a CA bundle without certificates was accepted")
	}

	wrongHost := s3test.NewCerts(t, nil, []string{"s3.example.com"})
	other := s3test.StartTLS(t, wrongHost.Cert, wrongHost.Key, wrongHost.CA)
	if err := s3Store(t, other, nil).Check(ctx); !strings.Contains(fmt.Sprint(err), "not valid for that host name") {
		t.Errorf("certificate for another host: %v", err)
	}

	plain := s3test.Start(t)
	s := s3Store(t, plain, func(c *S3Config) { c.Endpoint = strings.Replace(plain.Endpoint, "http://", "https://", 1) })
	if err := s.Check(ctx); !strings.Contains(fmt.Sprint(err), "does not speak TLS") {
		t.Errorf("https:// to a plain HTTP server: %v", err)
	}
}
