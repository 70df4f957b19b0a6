package objstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// DefaultPartSize is the multipart part size of S3 uploads. minio-go sizes parts for the largest
// possible object (5 TiB) when the size is unknown, buffering ~600 MiB per upload; 8 MiB keeps
// memory small and still allows objects of 80 GiB (10,000 parts), well past etcd's 8 GiB quota.
const DefaultPartSize = 8 << 20

// S3Config says where and as whom to store objects in S3-compatible storage.
type S3Config struct {
	// Endpoint is the service URL: https://s3.eu-west-1.amazonaws.com, http://minio.backup:9000.
	Endpoint string
	Bucket   string
	// Prefix is put in front of every key; a missing trailing "/" is added.
	Prefix string
	// Region is the bucket's region; empty asks the service.
	Region string
	// ForcePathStyle addresses the bucket as ENDPOINT/BUCKET rather than BUCKET.ENDPOINT (MinIO,
	// Ceph and most on-premises services want it).
	ForcePathStyle bool
	// Credentials; all empty means anonymous requests.
	AccessKeyID, SecretAccessKey, SessionToken string
	// CABundle (PEM) is trusted in addition to the system roots, for a private CA.
	CABundle []byte
	// MaxRetries bounds retries of each request (0: minio-go's default of 10, which spends up to
	// ~10 s on an endpoint that is down).
	MaxRetries int
	// ReadStallTimeout fails a read of an object's body that waits this long for a byte (0:
	// DefaultReadStallTimeout). The HTTP client bounds the wait for a response's headers only; a
	// body stalled mid-way (a connection a store or a middlebox keeps open and silent) would
	// otherwise hold a restore until its command's whole timeout.
	ReadStallTimeout time.Duration
	// PartSize of multipart uploads; 0 is DefaultPartSize.
	PartSize uint64
}

// S3 is a Store in one bucket of an S3-compatible service.
type S3 struct {
	c        *minio.Client
	cfg      S3Config
	prefix   string
	endpoint string // scheme://host, for messages
	secrets  []string
}

// NewS3 builds the client. It does not contact the service; Check does.
func NewS3(cfg S3Config) (*S3, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return nil, fmt.Errorf("S3 endpoint %q must be a URL like https://s3.example.com or http://minio:9000 (no path, no credentials)", redactURL(cfg.Endpoint))
	}
	if cfg.Bucket == "" {
		return nil, errors.New("no S3 bucket given")
	}
	secure := u.Scheme == "https"
	tr, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, err
	}
	if len(cfg.CABundle) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(cfg.CABundle) {
			return nil, errors.New("the S3 CA bundle holds no PEM certificate")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	lookup := minio.BucketLookupAuto
	if cfg.ForcePathStyle {
		lookup = minio.BucketLookupPath
	}
	c, err := minio.New(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken),
		Secure:       secure,
		Transport:    tr,
		Region:       cfg.Region,
		BucketLookup: lookup,
		MaxRetries:   cfg.MaxRetries,
	})
	if err != nil {
		return nil, fmt.Errorf("S3 client for %s: %w", u.Host, err)
	}
	s := &S3{c: c, cfg: cfg, prefix: NormalizePrefix(cfg.Prefix), endpoint: u.Scheme + "://" + u.Host}
	for _, v := range []string{cfg.SecretAccessKey, cfg.SessionToken} {
		if v != "" {
			s.secrets = append(s.secrets, v)
		}
	}
	return s, nil
}

// NormalizePrefix is the prefix as S3 stores it: no leading "/", a trailing one unless empty.
func NormalizePrefix(prefix string) string {
	prefix = strings.TrimPrefix(prefix, "/")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return prefix
}

// ObjectKey is the key's name in the bucket: the prefix and the key.
func (s *S3) ObjectKey(key string) string { return s.prefix + key }

// Location is s3://bucket/prefix+key.
func (s *S3) Location(key string) string { return "s3://" + s.cfg.Bucket + "/" + s.prefix + key }

func (s *S3) object(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	return s.prefix + key, nil
}

// Check confirms the bucket exists and the credentials are accepted, so a backup fails before
// it starts streaming a snapshot rather than after. It lists one key under the prefix: a HEAD
// on the bucket (BucketExists) carries no error body, so wrong credentials would read as
// "400 Bad Request" or even as a missing bucket. Credentials allowed to write but not to list
// pass: the upload itself will tell.
func (s *S3) Check(ctx context.Context) error {
	for o := range s.c.ListObjectsIter(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: s.prefix, MaxKeys: 1}) {
		if o.Err != nil && errorCode(o.Err) != "AccessDenied" {
			return s.explain("checking bucket", "", o.Err)
		}
		break
	}
	return nil
}

// Put streams r as a multipart upload of PartSize parts (one part buffered at a time). minio-go
// aborts the upload when r or a request fails, and S3 shows a multipart upload only once it is
// completed, so a failed Put leaves no object.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, meta map[string]string) (ObjectInfo, error) {
	obj, err := s.object(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	part := s.cfg.PartSize
	if part == 0 {
		part = DefaultPartSize
	}
	info, err := s.c.PutObject(ctx, s.cfg.Bucket, obj, r, -1, minio.PutObjectOptions{
		PartSize:     part,
		UserMetadata: meta,
		ContentType:  "application/octet-stream",
	})
	if err != nil {
		return ObjectInfo{}, s.explain("uploading", key, err)
	}
	return ObjectInfo{Key: key, Size: info.Size, ETag: info.ETag, LastModified: info.LastModified, Metadata: lowerKeys(meta)}, nil
}

// DefaultReadStallTimeout is ReadStallTimeout's default: minio-go's own wait for a response's
// headers, so a silent body is given as long as a silent server.
const DefaultReadStallTimeout = time.Minute

// errStalled is the cause a stalled read cancels its request with.
var errStalled = errors.New("the store stalled")

// Get opens the object; errors while reading are explained like the others. Each read of the
// body (and the first request, which Stat makes) fails once it has waited ReadStallTimeout for the
// store: the time a caller takes between reads does not count.
func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, ObjectInfo, error) {
	obj, err := s.object(key)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	r := &s3Reader{s: s, key: key, ctx: ctx, cancel: cancel, stall: s.cfg.ReadStallTimeout}
	if r.stall <= 0 {
		r.stall = DefaultReadStallTimeout
	}
	if r.o, err = s.c.GetObject(ctx, s.cfg.Bucket, obj, minio.GetObjectOptions{}); err != nil {
		cancel(nil)
		return nil, ObjectInfo{}, s.explain("reading", key, err)
	}
	var st minio.ObjectInfo
	err = r.guard(func() (err error) { st, err = r.o.Stat(); return err })
	if err != nil {
		_ = r.Close()
		return nil, ObjectInfo{}, r.stalled(err)
	}
	return r, s.info(key, st), nil
}

type s3Reader struct {
	o      *minio.Object
	s      *S3
	key    string
	stall  time.Duration
	ctx    context.Context // the request's, cancelled with errStalled by the guard
	cancel context.CancelCauseFunc
}

// guard runs one call to the store, cancelling its request when it waits longer than r.stall.
func (r *s3Reader) guard(call func() error) error {
	t := time.AfterFunc(r.stall, func() { r.cancel(errStalled) })
	defer t.Stop()
	return call()
}

// stalled explains err, saying so when it is the stall guard's doing.
func (r *s3Reader) stalled(err error) error {
	if errors.Is(context.Cause(r.ctx), errStalled) {
		return fmt.Errorf("reading %s: the store sent nothing for %s: %w", r.s.Location(r.key), r.stall, errStalled)
	}
	return r.s.explain("reading", r.key, err)
}

func (r *s3Reader) Read(p []byte) (int, error) {
	var n int
	err := r.guard(func() (err error) { n, err = r.o.Read(p); return err })
	if err != nil && !errors.Is(err, io.EOF) {
		err = r.stalled(err)
	}
	return n, err
}

func (r *s3Reader) Close() error {
	defer r.cancel(nil)
	return r.o.Close()
}

// Stat describes the object.
func (s *S3) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	obj, err := s.object(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	st, err := s.c.StatObject(ctx, s.cfg.Bucket, obj, minio.StatObjectOptions{})
	if err != nil {
		return ObjectInfo{}, s.explain("reading", key, err)
	}
	return s.info(key, st), nil
}

func (s *S3) info(key string, st minio.ObjectInfo) ObjectInfo {
	return ObjectInfo{Key: key, Size: st.Size, ETag: st.ETag, LastModified: st.LastModified, Metadata: lowerKeys(st.UserMetadata)}
}

// Delete removes the object; S3 answers a delete of a missing key with success, and a
// NoSuchKey from a stricter service is treated the same.
func (s *S3) Delete(ctx context.Context, key string) error {
	obj, err := s.object(key)
	if err != nil {
		return err
	}
	err = s.c.RemoveObject(ctx, s.cfg.Bucket, obj, minio.RemoveObjectOptions{})
	if err != nil && errorCode(err) != "NoSuchKey" {
		return s.explain("deleting", key, err)
	}
	return nil
}

// List returns the objects under prefix, in key order. S3 listings carry no user metadata, so
// Metadata is empty here; Stat has it.
func (s *S3) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	var out []ObjectInfo
	for o := range s.c.ListObjectsIter(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, s.explain("listing", prefix, o.Err)
		}
		out = append(out, ObjectInfo{Key: strings.TrimPrefix(o.Key, s.prefix), Size: o.Size, ETag: o.ETag, LastModified: o.LastModified, Metadata: map[string]string{}})
	}
	return out, nil
}
