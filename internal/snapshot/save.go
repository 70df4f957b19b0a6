package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"regexp"
	"strconv"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/etcd-steward/steward/internal/encryption"
	"github.com/etcd-steward/steward/internal/objstore"
)

// SaveOptions says what to snapshot into where.
type SaveOptions struct {
	// Key is the backup's key (BackupKey): the snapshot goes to Key/snapshot.db[.zst], then the
	// manifest to Key/manifest.json.
	Key         string
	Compression Compression
	// Namespace, Cluster and Backup are recorded in the manifest and the object's metadata.
	Namespace, Cluster, Backup string
	// StatusTimeout bounds the status call that opens a save (default 10s): a member that does
	// not answer fails the backup at once.
	StatusTimeout time.Duration
	// IdleTimeout fails the save when etcd sends nothing for that long (default 1m); a slow
	// upload does not count, only waiting on etcd.
	IdleTimeout time.Duration
	// HashTimeout bounds the HashKV read after the snapshot (default 2m); see Manifest.HashKV.
	HashTimeout time.Duration
	// AllowNoLeader snapshots a member that has no leader (quorum lost): what a recovery from
	// quorum loss needs; otherwise such a member is refused, since it may have missed writes.
	AllowNoLeader bool
	// LeaderWait is how long a member without a leader gets to find one before it is refused
	// (default 30s): an election or a short partition ends within seconds, and failing the backup
	// for it left a user's one-off backup Failed while the cluster was healthy again.
	LeaderWait time.Duration
	// Keys, if set, seal the stored object with age under its first key (after compression):
	// the object becomes <object>.age and the manifest names the key's ID, never the key.
	Keys *encryption.Keyring
	// Logf, if set, receives progress lines.
	Logf func(format string, args ...any)
}

// Save streams a snapshot of the one member cli is dialled to into store: raw bytes through the
// revision scanner, the zstd encoder and a sha256, into a streaming Put. Nothing is buffered but
// a multipart part and the encoder's window. The manifest is written once the snapshot object
// is complete; a failure at any point leaves no snapshot object.
func Save(ctx context.Context, cli *clientv3.Client, store objstore.Store, opts SaveOptions) (Manifest, error) {
	opts.defaults()
	if eps := cli.Endpoints(); len(eps) != 1 {
		return Manifest{}, fmt.Errorf("a snapshot is taken from exactly one member; the client has endpoints %v", eps)
	}
	if _, err := ParseCompression(string(opts.Compression)); err != nil {
		return Manifest{}, err
	}
	started := time.Now().UTC()
	m, err := memberFacts(ctx, cli, opts)
	if err != nil {
		return Manifest{}, err
	}
	m.FormatVersion, m.Namespace, m.Cluster, m.Backup = FormatVersion, opts.Namespace, opts.Cluster, opts.Backup
	m.Compression, m.Object, m.StartedAt = opts.Compression, opts.Compression.ObjectName(), started
	if opts.Keys != nil {
		m.Encryption, m.KeyID, m.Object = EncryptionAge, opts.Keys.KeyID(), m.Object+sealedSuffix
	}
	objKey := opts.Key + "/" + m.Object
	opts.Logf("taking a snapshot of member %s (%s, etcd %s) into %s", m.Member.Name, m.Member.ID, m.EtcdVersion, store.Location(objKey))

	var waits streamWaits
	streamStart := time.Now()
	scan, stored, err := stream(ctx, cli, store, objKey, m, opts, &waits)
	if err != nil {
		return Manifest{}, err
	}
	streamed := time.Since(streamStart)
	m.Revision, m.CompactRevision, m.RawSize = scan.Revision, scan.CompactRevision, scan.RawSize
	if m.StorageVersion == "" {
		m.StorageVersion = scan.StorageVersion
	}
	m.Size, m.SHA256, m.CompletedAt = stored.n, hex.EncodeToString(stored.h.Sum(nil)), time.Now().UTC()
	hashStart := time.Now()
	m.HashKV = hashKV(ctx, cli, m.Revision, opts)
	hashed := time.Since(hashStart)
	if err := writeManifest(ctx, store, opts.Key, m); err != nil {
		// Without a manifest the backup did not happen; do not leave its snapshot behind.
		_ = store.Delete(context.WithoutCancel(ctx), objKey)
		return Manifest{}, fmt.Errorf("writing the manifest: %w", err)
	}
	opts.Logf("snapshot at revision %d: %d bytes, stored as %d bytes (%s) in %s", m.Revision, m.RawSize, m.Size, m.Compression, time.Since(started).Round(time.Millisecond))
	// Where the time went (docs/measurements.md, backups of 1 GiB): the stream's stages wait on
	// each other, so its time is the encoder's work plus what it waited for on either side.
	opts.Logf("took: stream %s (the encoder waited %s on etcd, %s on the upload), etcd's hash of the keyspace %s",
		streamed.Round(time.Millisecond), time.Duration(waits.etcd.Load()).Round(time.Millisecond),
		time.Duration(waits.upload.Load()).Round(time.Millisecond), hashed.Round(time.Millisecond))
	return m, nil
}

func (o *SaveOptions) defaults() {
	if o.StatusTimeout <= 0 {
		o.StatusTimeout = 10 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = time.Minute
	}
	if o.LeaderWait <= 0 {
		o.LeaderWait = 30 * time.Second
	}
	if o.HashTimeout <= 0 {
		o.HashTimeout = 2 * time.Minute
	}
	if o.Compression == "" {
		o.Compression = CompressionZstd
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// statusWithLeader asks the member's status, again every second while it has no leader, for up to
// opts.LeaderWait (not at all with AllowNoLeader).
func statusWithLeader(ctx context.Context, cli *clientv3.Client, opts SaveOptions) (*clientv3.StatusResponse, error) {
	ep := cli.Endpoints()[0]
	deadline := time.Now().Add(opts.LeaderWait)
	for {
		sctx, cancel := context.WithTimeout(ctx, opts.StatusTimeout)
		st, err := cli.Status(sctx, ep)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("etcd member %s did not answer its status within %s: %w", ep, opts.StatusTimeout, err)
		}
		if st.Leader != 0 || st.IsLearner || opts.AllowNoLeader || time.Now().After(deadline) {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, nil
		case <-time.After(time.Second):
		}
	}
}

// memberFacts asks the member who it is. Status is answered locally, without quorum, so it is
// what tells a lost quorum apart from a member that is down, within StatusTimeout either way.
func memberFacts(ctx context.Context, cli *clientv3.Client, opts SaveOptions) (Manifest, error) {
	ep := cli.Endpoints()[0]
	st, err := statusWithLeader(ctx, cli, opts)
	if err != nil {
		return Manifest{}, err
	}
	sctx, cancel := context.WithTimeout(ctx, opts.StatusTimeout)
	defer cancel()
	var m Manifest
	id := st.Header.MemberId
	m.Member.ID, m.ClusterID = fmt.Sprintf("%x", id), fmt.Sprintf("%x", st.Header.ClusterId)
	m.EtcdVersion, m.StorageVersion = st.Version, st.StorageVersion
	switch {
	case st.IsLearner:
		return Manifest{}, fmt.Errorf("etcd member %s (%s) is a learner, which may lag behind: snapshot a voting member", ep, m.Member.ID)
	case st.Leader == 0 && !opts.AllowNoLeader:
		return Manifest{}, fmt.Errorf("etcd member %s (%s) has had no leader for %s: the cluster lost quorum or the member is cut off, and a snapshot now may miss committed writes", ep, m.Member.ID, opts.LeaderWait)
	}
	// Status lists active alarms among its errors (as internal/etcd reads them); AlarmList
	// would be a raft proposal, which hangs without quorum.
	for _, e := range st.Errors {
		if a := alarmText.FindStringSubmatch(e); a != nil && a[2] == "CORRUPT" && a[1] == strconv.FormatUint(id, 10) {
			return Manifest{}, fmt.Errorf("etcd member %s (%s) has a CORRUPT alarm: its data cannot be trusted; snapshot another member", ep, m.Member.ID)
		}
		opts.Logf("member %s reports: %s", ep, e)
	}
	// The name is for people only: a serializable member list is answered locally, and a
	// failure does not fail the backup.
	if ml, err := cli.MemberList(sctx, clientv3.WithSerializable()); err == nil {
		for _, mem := range ml.Members {
			if mem.ID == id {
				m.Member.Name = mem.Name
			}
		}
	}
	return m, nil
}

var alarmText = regexp.MustCompile(`memberID:\s*(\d+)\s+alarm:\s*([A-Z_]+)`)

// DialOptions are gRPC options for the client Save uses. gRPC grows a stream's flow-control
// window up to 16 MiB when the network is faster than the reader, and a snapshot is read no
// faster than the upload goes; a fixed 1 MiB window bounds what waits in memory, and still
// moves a gigabyte a second at a 1 ms round trip.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithInitialWindowSize(1 << 20), grpc.WithInitialConnWindowSize(1 << 20)}
}

// hashKV asks the member for its hash of the keyspace at the snapshot's revision, so a restore
// drill can tell the snapshot holds exactly what the member served. It is best effort: a
// compaction past the revision since, or a slow member, only means there is nothing to compare.
func hashKV(ctx context.Context, cli *clientv3.Client, rev int64, opts SaveOptions) *HashKV {
	hctx, cancel := context.WithTimeout(ctx, opts.HashTimeout)
	defer cancel()
	resp, err := cli.HashKV(hctx, cli.Endpoints()[0], rev)
	if err != nil {
		opts.Logf("no HashKV at revision %d (the restore drill will not compare content): %v", rev, err)
		return nil
	}
	return &HashKV{Hash: resp.Hash, CompactRevision: resp.CompactRevision}
}

// hashCounter is the sha256 and size of the bytes stored.
type hashCounter struct {
	h hash.Hash
	n int64
}

func (c *hashCounter) Write(p []byte) (int, error) {
	c.h.Write(p)
	c.n += int64(len(p))
	return len(p), nil
}

var (
	errIdle        = errors.New("etcd stopped sending the snapshot")
	errUploadEnded = errors.New("the upload ended")
)

// stream runs the pipeline: etcd -> scanner and encoder -> hash -> pipe -> store.Put.
func stream(ctx context.Context, cli *clientv3.Client, store objstore.Store, objKey string, m Manifest, opts SaveOptions, waits *streamWaits) (ScanResult, *hashCounter, error) {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var waiting atomic.Int64 // unix nanos since a read from etcd started; 0 when none is waiting
	stopWatch := watchIdle(sctx, &waiting, opts.IdleTimeout, cancel)
	defer stopWatch()

	waiting.Store(time.Now().UnixNano())
	resp, err := cli.SnapshotWithVersion(sctx)
	waiting.Store(0)
	if err != nil {
		return ScanResult{}, nil, fmt.Errorf("starting the snapshot stream: %w", causeOr(sctx, err))
	}
	defer func() { _ = resp.Snapshot.Close() }()

	scanner := NewScanner()
	stored := &hashCounter{h: sha256.New()}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := encode(etcdReader{r: resp.Snapshot, waiting: &waiting, waited: &waits.etcd},
			io.MultiWriter(stored, timedWriter{w: pw, waited: &waits.upload}), scanner, opts.Compression, opts.Keys)
		if err == nil {
			err = checkScan(scanner)
		}
		_ = pw.CloseWithError(err) // nil: the Put sees EOF and completes
		done <- err
	}()
	meta := map[string]string{"compression": string(opts.Compression), "cluster": m.Namespace + "/" + m.Cluster,
		"member": m.Member.Name + " (" + m.Member.ID + ")", "backup": m.Backup}
	if m.Encryption != "" {
		meta[metaEncryption], meta[metaKeyID] = string(m.Encryption), m.KeyID
	}
	_, putErr := store.Put(sctx, objKey, pr, meta)
	_ = pr.CloseWithError(errUploadEnded) // unblock the encoder if the Put gave up early
	streamErr := <-done
	switch {
	case streamErr != nil && !errors.Is(streamErr, errUploadEnded):
		// The stream failed first (the Put then failed on it): that is the cause.
		return ScanResult{}, nil, fmt.Errorf("snapshot stream from %s: %w", cli.Endpoints()[0], causeOr(sctx, streamErr))
	case putErr != nil:
		return ScanResult{}, nil, causeOr(sctx, putErr)
	}
	r, err := scanner.Result()
	return r, stored, err
}

// checkScan insists on a complete snapshot with etcd's hash: a stream cut short must not be
// stored as a backup.
func checkScan(s *Scanner) error {
	r, err := s.Result()
	if err != nil {
		return err
	}
	if !r.HasHash {
		return errors.New("the snapshot stream ended without etcd's sha256")
	}
	return nil
}

// encode compresses src into dst, sealing the compressed stream when keys is set; every layer is
// closed in order so the object ends with each one's last frame.
func encode(src io.Reader, dst io.Writer, scanner *Scanner, c Compression, keys *encryption.Keyring) error {
	closers := []io.Closer{}
	out := dst
	if keys != nil {
		sealer, err := keys.Seal(out)
		if err != nil {
			return err
		}
		closers, out = append(closers, sealer), sealer
	}
	if c == CompressionZstd {
		enc, err := newEncoder(out)
		if err != nil {
			return err
		}
		closers, out = append(closers, enc), enc
	}
	buf := make([]byte, 64<<10)
	_, err := io.CopyBuffer(io.MultiWriter(scanner, out), src, buf)
	for i := len(closers) - 1; i >= 0; i-- {
		if cerr := closers[i].Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// streamWaits adds up, in nanoseconds, how long the encoder waited on each side of the stream.
type streamWaits struct{ etcd, upload atomic.Int64 }

// etcdReader marks the time a read from etcd has been waiting, for watchIdle, and adds it to waited.
type etcdReader struct {
	r       io.Reader
	waiting *atomic.Int64
	waited  *atomic.Int64
}

func (e etcdReader) Read(p []byte) (int, error) {
	start := time.Now()
	e.waiting.Store(start.UnixNano())
	defer func() {
		e.waiting.Store(0)
		e.waited.Add(int64(time.Since(start)))
	}()
	return e.r.Read(p)
}

// timedWriter adds the time its writes block to waited (a pipe's writes last until the upload
// has read them).
type timedWriter struct {
	w      io.Writer
	waited *atomic.Int64
}

func (t timedWriter) Write(p []byte) (int, error) {
	start := time.Now()
	defer func() { t.waited.Add(int64(time.Since(start))) }()
	return t.w.Write(p)
}

// watchIdle cancels the stream with errIdle when one read from etcd waits longer than idle.
func watchIdle(ctx context.Context, waiting *atomic.Int64, idle time.Duration, cancel context.CancelCauseFunc) (stop func()) {
	stopCh := make(chan struct{})
	go func() {
		t := time.NewTicker(max(idle/10, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-stopCh:
				return
			case now := <-t.C:
				if since := waiting.Load(); since != 0 && now.Sub(time.Unix(0, since)) > idle {
					cancel(fmt.Errorf("%w for %s", errIdle, idle))
					return
				}
			}
		}
	}()
	return func() { close(stopCh) }
}

// causeOr prefers the reason the stream was cancelled (idle) over the error that resulted.
func causeOr(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && errors.Is(cause, errIdle) {
		return cause
	}
	return err
}
