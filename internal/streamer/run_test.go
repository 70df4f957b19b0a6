package streamer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-steward/steward/internal/etcdtest"
	"github.com/etcd-steward/steward/internal/objstore"
	"github.com/etcd-steward/steward/internal/pitr"
	"github.com/etcd-steward/steward/internal/segstore"
	"github.com/etcd-steward/steward/internal/snapshot"
)

const prefix = "ns/db"

type harness struct {
	t     *testing.T
	cli   *clientv3.Client
	store objstore.Store
	mu    sync.Mutex
	prog  []Progress
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	c := etcdtest.Start(t, 1)
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.ClientURLs(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	store, err := objstore.NewVolume(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, cli: cli, store: store}
}

// base records a base snapshot's manifest at the current revision (the streamer reads manifests
// only) and returns that revision.
func (h *harness) base(name string) int64 {
	h.t.Helper()
	resp, err := h.cli.Get(context.Background(), "any")
	if err != nil {
		h.t.Fatal(err)
	}
	b, _ := json.Marshal(snapshot.Manifest{FormatVersion: 1, Backup: name, Revision: resp.Header.Revision,
		ClusterID: fmt.Sprintf("%x", resp.Header.ClusterId), CompletedAt: time.Now()})
	if _, err := h.store.Put(context.Background(), prefix+"/"+name+"/"+snapshot.ManifestName, bytes.NewReader(b), nil); err != nil {
		h.t.Fatal(err)
	}
	return resp.Header.Revision
}

func (h *harness) start(ctx context.Context) chan error {
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Client: h.cli, Store: h.store, Prefix: prefix, Interval: 300 * time.Millisecond,
			Logf: h.t.Logf, Progress: func(p Progress) { h.mu.Lock(); h.prog = append(h.prog, p); h.mu.Unlock() }})
	}()
	return done
}

func (h *harness) puts(from, n int) int64 {
	h.t.Helper()
	var rev int64
	for i := from; i < from+n; i++ {
		resp, err := h.cli.Put(context.Background(), fmt.Sprintf("/k/%d", i%17), fmt.Sprint(i))
		if err != nil {
			h.t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	return rev
}

// chainRevisions reads every revision the store's chain holds to rev, and checks each against the
// source's own history at that revision.
// chainEnd is the last revision the stored segments reach.
func (h *harness) chainEnd() int64 {
	h.t.Helper()
	_, segs, err := segstore.List(context.Background(), h.store, prefix)
	if err != nil {
		h.t.Fatal(err)
	}
	var end int64
	for _, s := range segs {
		end = max(end, s.Last)
	}
	return end
}

func (h *harness) chainRevisions(rev int64) []int64 {
	h.t.Helper()
	ctx := context.Background()
	bases, segs, err := segstore.List(ctx, h.store, prefix)
	if err != nil {
		h.t.Fatal(err)
	}
	plan, err := pitr.ForRevision(bases, segs, rev)
	if err != nil {
		h.t.Fatal(err)
	}
	c := segstore.NewChain(ctx, h.store, nil, plan)
	defer func() { _ = c.Close() }()
	var revs []int64
	for {
		r, _, err := c.Next()
		if errors.Is(err, io.EOF) {
			return revs
		}
		if err != nil {
			h.t.Fatal(err)
		}
		if r == nil {
			continue
		}
		revs = append(revs, r.Revision)
		live, err := h.cli.Get(ctx, string(r.Events[0].Kv.Key), clientv3.WithRev(r.Revision))
		if err != nil {
			h.t.Fatal(err)
		}
		if len(live.Kvs) != 1 || !bytes.Equal(live.Kvs[0].Value, r.Events[0].Kv.Value) {
			h.t.Errorf("revision %d: recorded %s, the source has %v", r.Revision, r.Events[0].Kv, live.Kvs)
		}
	}
}

func contiguous(revs []int64, from, to int64) error {
	if int64(len(revs)) < to-from+1 {
		return fmt.Errorf("%d revisions, want %d-%d", len(revs), from, to)
	}
	for i, r := range revs[:to-from+1] {
		if r != from+int64(i) {
			return fmt.Errorf("revision %d at %d, want %d", r, i, from+int64(i))
		}
	}
	return nil
}

// waitDurable waits until the streamer reports rev durable.
func (h *harness) waitDurable(rev int64) {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		n := len(h.prog)
		ok := n > 0 && h.prog[n-1].Durable >= rev
		h.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	h.t.Fatalf("revision %d not durable within 20s", rev)
}

// No base, no stream; then every revision after the base lands in the chain, across a restart of
// the streamer (it continues from the last revision uploaded, none twice, none missed), and a
// stop uploads what it held.
func TestStreamsEveryRevisionAcrossRestarts(t *testing.T) {
	h := newHarness(t)
	if err := Run(context.Background(), Config{Client: h.cli, Store: h.store, Prefix: prefix}); !errors.Is(err, ErrNoBase) {
		t.Fatalf("without a base: %v, want ErrNoBase", err)
	}
	h.puts(0, 5)
	b := h.base("b1")

	ctx, cancel := context.WithCancel(context.Background())
	done := h.start(ctx)
	rev := h.puts(0, 40)
	h.waitDurable(rev)
	durable := rev
	rev = h.puts(40, 10) // held when stopped
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("stopped: %v", err)
	}
	// The stop uploads what the watch had delivered; a revision written just before the cancel
	// may not have reached the streamer yet (CI saw 56 of 46-56 missing here), and the next run
	// picks it up: the check after the restart covers every revision, none twice.
	end := h.chainEnd()
	if end < durable {
		t.Fatalf("the chain ends at %d, before revision %d reported durable", end, durable)
	}
	t.Logf("the stop uploaded %d of the %d revisions written just before it", end-durable, rev-durable)
	if err := contiguous(h.chainRevisions(end), b+1, end); err != nil {
		t.Fatalf("after the first run: %v", err)
	}

	rev2 := h.puts(50, 30) // written while no streamer runs
	ctx, cancel = context.WithCancel(context.Background())
	done = h.start(ctx)
	rev3 := h.puts(80, 20)
	h.waitDurable(rev3)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	revs := h.chainRevisions(rev3)
	if err := contiguous(revs, b+1, rev3); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	if int64(len(revs)) != rev3-b {
		t.Errorf("%d revisions in the chain, want exactly %d (none twice)", len(revs), rev3-b)
	}
	t.Logf("base %d, chain to %d (%d written while stopped)", b, rev3, rev2-rev)
}

// A watch compacted past the chain's end is a HoleError naming the revisions lost; a new base
// after the compaction starts a new range, and the hole shows between the ranges.
func TestCompactedWatchIsAHole(t *testing.T) {
	h := newHarness(t)
	b := h.base("b1")
	ctx, cancel := context.WithCancel(context.Background())
	done := h.start(ctx)
	rev := h.puts(0, 10)
	h.waitDurable(rev)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lost := h.puts(10, 10)
	if _, err := h.cli.Compact(context.Background(), lost); err != nil {
		t.Fatal(err)
	}
	err := Run(context.Background(), Config{Client: h.cli, Store: h.store, Prefix: prefix, Interval: 300 * time.Millisecond})
	var hole *HoleError
	if !errors.As(err, &hole) || hole.After != rev || hole.Compacted != lost {
		t.Fatalf("a compacted watch: %v, want a hole after %d to %d", err, rev, lost)
	}
	b2 := h.base("b2")
	ctx, cancel = context.WithCancel(context.Background())
	done = h.start(ctx)
	rev2 := h.puts(20, 5)
	h.waitDurable(rev2)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	bases, segs, err := segstore.List(context.Background(), h.store, prefix)
	if err != nil {
		t.Fatal(err)
	}
	rs := pitr.Ranges(bases, segs)
	if len(rs) != 2 || rs[0].From != b || rs[0].To != rev || rs[1].From != b2 || rs[1].To != rev2 {
		t.Errorf("ranges %v, want %d-%d and %d-%d", rs, b, rev, b2, rev2)
	}
}
