package cli

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-steward/steward/internal/encryption"
	"github.com/etcd-steward/steward/internal/etcd"
	"github.com/etcd-steward/steward/internal/objstore"
	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/internal/snapshot"
)

// destination is where backups live: S3 or a mounted directory.
type destination struct {
	s3Endpoint, s3Bucket, s3Prefix, s3Region, s3CAFile string
	s3PathStyle                                        bool
	volumeDir                                          string
	keysFile                                           string
	// keys is the keyring read from keysFile by store (nil without one): it seals what is
	// written and opens what is read.
	keys *encryption.Keyring
}

func (d *destination) bind(fs *flag.FlagSet) {
	fs.StringVar(&d.s3Endpoint, "s3-endpoint", "", "S3 service URL (http://minio:9000; default with --s3-bucket: "+awsEndpoint+"); credentials come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN")
	fs.StringVar(&d.s3Bucket, "s3-bucket", "", "S3 bucket")
	fs.StringVar(&d.s3Prefix, "s3-prefix", "", "prefix of every object key in the bucket")
	fs.StringVar(&d.s3Region, "s3-region", "", "the bucket's region (empty: ask the service)")
	fs.BoolVar(&d.s3PathStyle, "s3-force-path-style", false, "address the bucket as ENDPOINT/BUCKET (MinIO, Ceph) instead of BUCKET.ENDPOINT")
	fs.StringVar(&d.s3CAFile, "s3-ca-file", "", "PEM bundle of CAs to trust for the S3 endpoint, besides the system's")
	fs.StringVar(&d.volumeDir, "volume-dir", "", "directory of a mounted volume to keep backups in, instead of S3")
	fs.StringVar(&d.keysFile, "encryption-keys-file", "", "age identity file (age-keygen's output): the first key seals what is written, every key opens what is read")
}

// awsEndpoint is Amazon S3's; minio-go turns it into the bucket region's endpoint.
const awsEndpoint = "https://s3.amazonaws.com"

// store builds the destination's store (env supplies the S3 credentials) and reads its keys.
func (d *destination) store(env func(string) string) (objstore.Store, error) {
	if d.keysFile != "" {
		text, err := os.ReadFile(d.keysFile)
		if err != nil {
			return nil, fmt.Errorf("--encryption-keys-file: %w (is the key Secret there, with that key?)", err)
		}
		if d.keys, err = encryption.ParseKeyring(text); err != nil {
			return nil, fmt.Errorf("--encryption-keys-file %s: %w", d.keysFile, err)
		}
	}
	s3 := d.s3Endpoint != "" || d.s3Bucket != ""
	switch {
	case s3 && d.volumeDir != "":
		return nil, usageError("give either S3 flags or --volume-dir, not both")
	case d.volumeDir != "":
		return objstore.NewVolume(d.volumeDir)
	case !s3:
		return nil, usageError("no destination: give --s3-bucket (and --s3-endpoint unless it is Amazon S3), or --volume-dir")
	case d.s3Bucket == "":
		return nil, usageError("--s3-bucket is required with --s3-endpoint")
	}
	endpoint := d.s3Endpoint
	if endpoint == "" {
		endpoint = awsEndpoint
	}
	cfg := objstore.S3Config{Endpoint: endpoint, Bucket: d.s3Bucket, Prefix: d.s3Prefix, Region: d.s3Region,
		ForcePathStyle: d.s3PathStyle, AccessKeyID: env("AWS_ACCESS_KEY_ID"), SecretAccessKey: env("AWS_SECRET_ACCESS_KEY"),
		SessionToken: env("AWS_SESSION_TOKEN")}
	if d.s3CAFile != "" {
		b, err := os.ReadFile(d.s3CAFile)
		if err != nil {
			return nil, fmt.Errorf("--s3-ca-file: %w", err)
		}
		cfg.CABundle = b
	}
	return objstore.NewS3(cfg)
}

// objectKey is key as the store names it: with the S3 prefix in front.
func objectKey(store objstore.Store, key string) string {
	if s3, ok := store.(*objstore.S3); ok {
		return s3.ObjectKey(key)
	}
	return key
}

// backupRef names the backup: --backup-key, or --namespace/--cluster/--backup.
type backupRef struct {
	key, namespace, cluster, backup string
}

func (b *backupRef) bind(fs *flag.FlagSet) {
	fs.StringVar(&b.key, "backup-key", "", "the backup's key in the store (default <namespace>/<cluster>/<backup>); its objects are <key>/snapshot.db.zst and <key>/manifest.json")
	fs.StringVar(&b.namespace, "namespace", "", "the EtcdCluster's namespace (recorded in the manifest)")
	fs.StringVar(&b.cluster, "cluster", "", "the EtcdCluster's name (recorded in the manifest)")
	fs.StringVar(&b.backup, "backup", "", "the backup's name (recorded in the manifest)")
}

func (b *backupRef) resolve() (string, error) {
	if b.key != "" {
		return strings.Trim(b.key, "/"), nil
	}
	if b.namespace == "" || b.cluster == "" || b.backup == "" {
		return "", usageError("give --backup-key, or --namespace, --cluster and --backup")
	}
	return snapshot.BackupKey(b.namespace, b.cluster, b.backup), nil
}

// etcdFlags reach one member.
type etcdFlags struct {
	endpoint, cacert, cert, key string
}

func (e *etcdFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&e.endpoint, "endpoint", "", "client URL of one member (https://10.0.0.5:2379): save snapshots it, stream watches it, a point-in-time verify compares with it")
	fs.StringVar(&e.cacert, "cacert", "", "CA bundle (PEM) the member's certificate must chain to; the host name is not checked, as members are dialled by Pod IP")
	fs.StringVar(&e.cert, "cert", "", "client certificate (PEM) to present")
	fs.StringVar(&e.key, "key", "", "the client certificate's private key (PEM)")
}

// client dials the member. With --cacert the member's certificate must chain to those CAs (no
// host-name check, as Steward's own client does); with https and no --cacert, the system roots
// and the host name are checked.
func (e *etcdFlags) client() (*clientv3.Client, error) {
	u, err := url.Parse(e.endpoint)
	switch {
	case e.endpoint == "":
		return nil, usageError("--endpoint is required")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, usageError(fmt.Sprintf("--endpoint %q: want a client URL like https://10.0.0.5:2379", e.endpoint))
	case (e.cert == "") != (e.key == ""):
		return nil, usageError("--cert and --key go together")
	case u.Scheme == "http" && (e.cacert != "" || e.cert != ""):
		return nil, usageError("TLS files given for an http:// endpoint: use https://")
	}
	var tc *tls.Config
	if u.Scheme == "https" {
		if tc, err = e.tlsConfig(); err != nil {
			return nil, err
		}
	}
	return clientv3.New(clientv3.Config{Endpoints: []string{e.endpoint}, TLS: tc, DialTimeout: 10 * time.Second,
		DialKeepAliveTime: 30 * time.Second, DialKeepAliveTimeout: 10 * time.Second, Logger: zap.NewNop(),
		DialOptions: snapshot.DialOptions()})
}

func (e *etcdFlags) tlsConfig() (*tls.Config, error) {
	var certs []tls.Certificate
	if e.cert != "" {
		c, err := tls.LoadX509KeyPair(e.cert, e.key)
		if err != nil {
			return nil, fmt.Errorf("--cert/--key: %w", err)
		}
		certs = append(certs, c)
	}
	if e.cacert == "" {
		return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: certs}, nil
	}
	b, err := os.ReadFile(e.cacert)
	if err != nil {
		return nil, fmt.Errorf("--cacert: %w", err)
	}
	roots, err := pki.ParseCertsPEM(b)
	if err != nil {
		return nil, fmt.Errorf("--cacert %s: %w", e.cacert, err)
	}
	if len(roots) == 0 {
		return nil, fmt.Errorf("--cacert %s holds no PEM certificate", e.cacert)
	}
	creds := &etcd.Credentials{}
	creds.Set(roots, certs)
	return creds.Config(), nil
}

// usageError is a mistake in the command line (exit code 2).
type usageError string

func (u usageError) Error() string { return string(u) }

func isUsage(err error) bool {
	var u usageError
	return errors.As(err, &u)
}
