package streamer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-steward/steward/internal/encryption"
	"github.com/etcd-steward/steward/internal/objstore"
	"github.com/etcd-steward/steward/internal/pitr"
	"github.com/etcd-steward/steward/internal/segment"
	"github.com/etcd-steward/steward/internal/segstore"
)

// Defaults: a segment closes 5 s after its first revision or at 8 MiB, whichever first, so the
// recovery point stays under 10 s with an upload of a few hundred ms.
const (
	DefaultInterval = 5 * time.Second
	DefaultMaxBytes = 8 << 20
)

// Config of a streamer.
type Config struct {
	Client *clientv3.Client
	Store  objstore.Store
	// Prefix is the cluster's key in the store: <namespace>/<cluster>.
	Prefix string
	// Keys seals segments when set.
	Keys     *encryption.Keyring
	Interval time.Duration
	MaxBytes int
	Now      func() time.Time
	Logf     func(string, ...any)
	// Progress is called after every upload and every progress notification.
	Progress func(Progress)
}

// Progress is what the streamer has made durable.
type Progress struct {
	// Durable is the last revision uploaded; DurableStamp its stamp.
	Durable      int64
	DurableStamp time.Time
	// Head is the newest revision the watched member reported.
	Head int64
	// Segments uploaded by this run.
	Segments int
}

// HoleError says the watch was compacted past the chain's end: revisions After+1..Compacted are
// gone for good; a new base snapshot starts a new range.
type HoleError struct {
	After, Compacted int64
}

func (e *HoleError) Error() string {
	return fmt.Sprintf("the watch from revision %d was compacted (compaction at %d): revisions %d-%d are a hole in the restorable range until a new base snapshot",
		e.After+1, e.Compacted, e.After+1, e.Compacted)
}

// ErrNoBase is returned while the cluster has no base snapshot to continue from.
var ErrNoBase = errors.New("no base snapshot yet: the continuous backup starts from one")

// StartAfter is the revision a streamer continues from: the end of the newest restorable range, or
// the newest base when the chain stopped before it (a hole that base closed).
func StartAfter(bases []pitr.Base, segs []pitr.Segment) (int64, error) {
	ranges := pitr.Ranges(bases, segs)
	if len(ranges) == 0 {
		return 0, ErrNoBase
	}
	after := ranges[len(ranges)-1].To
	for _, b := range bases {
		after = max(after, b.Revision)
	}
	return after, nil
}

// Run streams until ctx ends (then uploads what it holds and returns nil) or the watch is
// compacted away (a *HoleError). Transient failures (a lost leader, a member rolled, the store
// down) are retried from the last revision written, never skipped.
func Run(ctx context.Context, cfg Config) error {
	cfg.defaults()
	bases, segs, err := segstore.List(ctx, cfg.Store, cfg.Prefix)
	if err != nil {
		return err
	}
	after, err := StartAfter(bases, segs)
	if err != nil {
		return err
	}
	s := &stream{cfg: cfg, ttls: map[int64]int64{}}
	cfg.Logf("continuing after revision %d", after)
	for {
		err := s.watch(ctx, after)
		if ctx.Err() != nil {
			// Stopped (SIGTERM): what is held is uploaded within the Pod's grace period.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
			defer cancel()
			return s.flush(fctx)
		}
		var hole *HoleError
		if errors.As(err, &hole) {
			if ferr := s.flush(ctx); ferr != nil {
				return ferr
			}
			return err
		}
		cfg.Logf("watch ended (%v); watching again after revision %d", err, s.last(after))
		after = s.last(after)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (c *Config) defaults() {
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	if c.Progress == nil {
		c.Progress = func(Progress) {}
	}
}

// stream is one streamer's state across watches: the open segment and what is durable.
type stream struct {
	cfg      Config
	buf      bytes.Buffer
	w        *segment.Writer
	after    int64 // the open segment's After
	first    time.Time
	leases   map[int64]bool // leases written into the open segment
	ttls     map[int64]int64
	progress Progress
	cluster  string
}

// last is the last revision held, written or not.
func (s *stream) last(fallback int64) int64 {
	if s.w != nil {
		return s.w.Last()
	}
	if s.progress.Durable > 0 {
		return s.progress.Durable
	}
	return fallback
}

func (s *stream) watch(ctx context.Context, after int64) error {
	if s.cluster == "" {
		resp, err := s.cfg.Client.Get(ctx, "\x00", clientv3.WithLimit(1), clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		s.cluster = fmt.Sprintf("%x", resp.Header.GetClusterId())
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := s.cfg.Client.Watch(wctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(after+1), clientv3.WithProgressNotify())
	tick := time.NewTicker(s.cfg.Interval / 5)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if s.w != nil && s.cfg.Now().Sub(s.first) >= s.cfg.Interval {
				if err := s.flush(ctx); err != nil {
					return err
				}
			}
		case wr, ok := <-wch:
			if !ok {
				return errors.New("watch channel closed")
			}
			if wr.CompactRevision > 0 || errors.Is(wr.Err(), rpctypes.ErrCompacted) {
				return &HoleError{After: s.last(after), Compacted: wr.CompactRevision}
			}
			if err := wr.Err(); err != nil {
				return err
			}
			if err := s.take(ctx, wr); err != nil {
				return err
			}
		}
	}
}

// take adds a watch response's revisions to the open segment, closing it when it is full.
func (s *stream) take(ctx context.Context, wr clientv3.WatchResponse) error {
	s.progress.Head = max(s.progress.Head, wr.Header.GetRevision())
	if wr.IsProgressNotify() {
		s.cfg.Progress(s.progress)
		return nil
	}
	revs, err := Revisions(wr.Events, wr.Header.GetRevision(), s.cfg.Now())
	if err != nil {
		return err
	}
	for _, r := range revs {
		if s.w == nil {
			s.buf.Reset()
			s.after = s.last(r.Revision - 1)
			if s.w, err = segment.NewWriter(&s.buf, segment.Header{ClusterID: s.cluster, After: s.after,
				Member: fmt.Sprintf("%x", wr.Header.GetMemberId())}); err != nil {
				return err
			}
			s.first, s.leases = r.Stamp, map[int64]bool{}
		}
		if err := s.writeLeases(ctx, r.Events); err != nil {
			return err
		}
		if err := s.w.Revision(r); err != nil {
			return err
		}
		if s.buf.Len() >= s.cfg.MaxBytes {
			if err := s.flush(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeLeases writes the granted TTL of every lease the events put keys under, once a segment, so
// each segment replays on its own. A lease already gone by the time it is asked about has TTL -1.
func (s *stream) writeLeases(ctx context.Context, events []*mvccpb.Event) error {
	for _, e := range events {
		id := e.GetKv().GetLease()
		if e.GetType() != mvccpb.Event_PUT || id == 0 || s.leases[id] {
			continue
		}
		ttl, ok := s.ttls[id]
		if !ok {
			resp, err := s.cfg.Client.TimeToLive(ctx, clientv3.LeaseID(id))
			if err != nil {
				return fmt.Errorf("lease %x: %w", id, err)
			}
			ttl = resp.GrantedTTL
			if ttl <= 0 {
				ttl = -1
			}
			s.ttls[id] = ttl
		}
		if err := s.w.Lease(segment.Lease{ID: id, TTL: ttl}); err != nil {
			return err
		}
		s.leases[id] = true
	}
	return nil
}

// flush closes the open segment and uploads it, retrying until it is stored or ctx ends.
func (s *stream) flush(ctx context.Context) error {
	if s.w == nil || s.w.Revisions() == 0 {
		s.w = nil
		return nil
	}
	t, err := s.w.Close()
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		key, err := segstore.Put(ctx, s.cfg.Store, s.cfg.Prefix, s.buf.Bytes(), t, s.after, s.cfg.Keys)
		if err == nil {
			s.cfg.Logf("uploaded %s (%d revisions, %d bytes)", key, t.Revisions, s.buf.Len())
			break
		}
		s.cfg.Logf("uploading the segment after revision %d: %v (attempt %d)", s.after, err, attempt+1)
		select {
		case <-ctx.Done():
			return fmt.Errorf("segment after revision %d not uploaded: %w", s.after, err)
		case <-time.After(min(time.Duration(attempt+1)*time.Second, 10*time.Second)):
		}
	}
	s.w = nil
	s.progress.Durable, s.progress.DurableStamp = t.Last, t.LastStamp
	s.progress.Segments++
	s.cfg.Progress(s.progress)
	return nil
}
