package framework

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The keys of the Secret an EtcdBackup's s3.credentialsSecretRef names.
const (
	S3AccessKeyIDKey     = "accessKeyID"
	S3SecretAccessKeyKey = "secretAccessKey"
)

// S3Config is the environment's S3 server (hack/e2e.sh exports it as STEWARD_E2E_S3_*; the
// local cluster runs versitygw on the host, on an address Pods and the host both reach).
type S3Config struct {
	Endpoint  string // http://198.18.0.1:17070 on the local cluster
	Bucket    string // steward-backups, created at cluster start
	Region    string
	AccessKey string
	SecretKey string
}

// S3ConfigFromEnv reads STEWARD_E2E_S3_{ENDPOINT,BUCKET,REGION,ACCESS_KEY,SECRET_KEY}.
func S3ConfigFromEnv() (S3Config, error) {
	c := S3Config{
		Endpoint:  os.Getenv("STEWARD_E2E_S3_ENDPOINT"),
		Bucket:    os.Getenv("STEWARD_E2E_S3_BUCKET"),
		Region:    envOr("STEWARD_E2E_S3_REGION", "us-east-1"),
		AccessKey: os.Getenv("STEWARD_E2E_S3_ACCESS_KEY"),
		SecretKey: os.Getenv("STEWARD_E2E_S3_SECRET_KEY"),
	}
	if c.Endpoint == "" || c.Bucket == "" || c.AccessKey == "" || c.SecretKey == "" {
		return c, fmt.Errorf("STEWARD_E2E_S3_{ENDPOINT,BUCKET,ACCESS_KEY,SECRET_KEY} are not all set (run the tests with make e2e)")
	}
	return c, nil
}

// S3 talks to the S3 server from the host (path-style requests, as Steward's are).
type S3 struct {
	S3Config
	Client *minio.Client
}

// NewS3 returns a client of cfg's server.
func NewS3(cfg S3Config) (*S3, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("S3 endpoint %q: want scheme://host:port", cfg.Endpoint)
	}
	c, err := minio.New(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:       u.Scheme == "https",
		Region:       cfg.Region,
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return nil, err
	}
	return &S3{S3Config: cfg, Client: c}, nil
}

// RequireS3 is NewS3 of the environment's server; it fails t when the environment has none.
func RequireS3(t testing.TB) *S3 {
	t.Helper()
	cfg, err := S3ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewS3(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// CreateS3Secret creates the Secret ns/name holding cfg's credentials under the keys an
// EtcdBackup expects.
func (f *Framework) CreateS3Secret(ctx context.Context, ns, name string, cfg S3Config) error {
	return f.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			S3AccessKeyIDKey:     []byte(cfg.AccessKey),
			S3SecretAccessKeyKey: []byte(cfg.SecretKey),
		},
	})
}

// List returns the objects of the bucket under prefix (recursively), in key order.
func (s *S3) List(ctx context.Context, prefix string) ([]minio.ObjectInfo, error) {
	var out []minio.ObjectInfo
	for o := range s.Client.ListObjects(ctx, s.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, o.Err
		}
		out = append(out, o)
	}
	return out, nil
}

// Get returns the content of an object.
func (s *S3) Get(ctx context.Context, key string) ([]byte, error) {
	o, err := s.Client.GetObject(ctx, s.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	defer func() { _ = o.Close() }()
	return io.ReadAll(o)
}

// Put writes an object.
func (s *S3) Put(ctx context.Context, key string, data []byte) error {
	_, err := s.Client.PutObject(ctx, s.Bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
	return err
}

// Delete removes an object, or with a key ending in "/" every object under that prefix.
func (s *S3) Delete(ctx context.Context, key string) error {
	if !strings.HasSuffix(key, "/") {
		return s.Client.RemoveObject(ctx, s.Bucket, key, minio.RemoveObjectOptions{})
	}
	objs, err := s.List(ctx, key)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := s.Client.RemoveObject(ctx, s.Bucket, o.Key, minio.RemoveObjectOptions{}); err != nil {
			return err
		}
	}
	return nil
}
