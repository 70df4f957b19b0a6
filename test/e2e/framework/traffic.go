package framework

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TrafficConfig shapes a client load. Zero values take the defaults.
type TrafficConfig struct {
	Prefix    string        // key prefix of this run (default "/e2e-traffic/")
	Workers   int           // concurrent clients (default 2)
	Interval  time.Duration // pause between a worker's iterations (default 20ms)
	OpTimeout time.Duration // per-request deadline (default 2s)
}

// Traffic writes and reads keys continuously, one goroutine per worker, and records
// every request. Each iteration puts a new key (written exactly once, so a lost write
// is detectable) and reads back a random key the worker wrote before.
type Traffic struct {
	cfg    TrafficConfig
	client *clientv3.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	history History
}

// StartTraffic starts the workers; Stop ends them and returns the history.
func StartTraffic(c *clientv3.Client, cfg TrafficConfig) *Traffic {
	if cfg.Prefix == "" {
		cfg.Prefix = "/e2e-traffic/"
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 20 * time.Millisecond
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = 2 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &Traffic{cfg: cfg, client: c, cancel: cancel}
	for w := 0; w < cfg.Workers; w++ {
		t.wg.Add(1)
		go t.worker(ctx, w)
	}
	return t
}

func (t *Traffic) worker(ctx context.Context, w int) {
	defer t.wg.Done()
	var written []string // keys this worker got acknowledged
	for seq := 0; ctx.Err() == nil; seq++ {
		key := fmt.Sprintf("%sw%d/%08d", t.cfg.Prefix, w, seq)
		val := fmt.Sprintf("v-%d-%d-%d", w, seq, time.Now().UnixNano())
		if t.put(ctx, w, key, val) {
			written = append(written, key)
		}
		if len(written) > 0 {
			t.get(ctx, w, written[rand.IntN(len(written))])
		}
		select {
		case <-ctx.Done():
		case <-time.After(t.cfg.Interval):
		}
	}
}

func (t *Traffic) put(ctx context.Context, w int, key, val string) bool {
	op := Op{Worker: w, Kind: OpPut, Key: key, Value: val, Start: time.Now()}
	rctx, cancel := context.WithTimeout(ctx, t.cfg.OpTimeout)
	resp, err := t.client.Put(rctx, key, val)
	cancel()
	op.End = time.Now()
	if ctx.Err() != nil && err != nil {
		// Stopped mid-request: not a result of the system under test. It may still
		// have been applied, so it stays in the history as unacknowledged.
		op.Err = stoppedPrefix + err.Error()
	} else if err != nil {
		op.Err = err.Error()
	} else {
		op.Revision = resp.Header.Revision
	}
	t.record(op)
	return err == nil
}

func (t *Traffic) get(ctx context.Context, w int, key string) {
	op := Op{Worker: w, Kind: OpGet, Key: key, Start: time.Now()}
	rctx, cancel := context.WithTimeout(ctx, t.cfg.OpTimeout)
	resp, err := t.client.Get(rctx, key) // linearizable by default
	cancel()
	op.End = time.Now()
	switch {
	case err != nil:
		op.Err = err.Error()
	default:
		op.Revision = resp.Header.Revision
		if len(resp.Kvs) > 0 {
			op.Found, op.Value = true, string(resp.Kvs[0].Value)
		}
	}
	if ctx.Err() != nil && err != nil {
		op.Err = stoppedPrefix + op.Err
	}
	t.record(op)
}

func (t *Traffic) record(op Op) {
	t.mu.Lock()
	t.history = append(t.history, op)
	t.mu.Unlock()
}

// Snapshot returns a copy of the history so far (the workers keep running).
func (t *Traffic) Snapshot() History {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append(History(nil), t.history...)
}

// Stop ends the workers, waits for them, and returns the full history.
func (t *Traffic) Stop() History {
	t.cancel()
	t.wg.Wait()
	return t.Snapshot()
}

// ReadAll reads every key of the run's prefix through c: the final state that
// History.LostWrites compares the acknowledged writes with.
func (t *Traffic) ReadAll(ctx context.Context, c *clientv3.Client) (map[string]string, error) {
	return ReadPrefix(ctx, c, t.cfg.Prefix)
}

// ReadPrefix reads all keys under prefix, in pages so a long run does not hit the
// request size limit.
func ReadPrefix(ctx context.Context, c *clientv3.Client, prefix string) (map[string]string, error) {
	out := map[string]string{}
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	for {
		resp, err := c.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(1000))
		if err != nil {
			return nil, err
		}
		for _, kv := range resp.Kvs {
			out[string(kv.Key)] = string(kv.Value)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// VerifyNoLostWrites stops nothing: it reads the final state through c and returns
// the acknowledged writes in h that are missing from it.
func (t *Traffic) VerifyNoLostWrites(ctx context.Context, c *clientv3.Client, h History) ([]Op, error) {
	final, err := t.ReadAll(ctx, c)
	if err != nil {
		return nil, err
	}
	return h.LostWrites(final), nil
}
