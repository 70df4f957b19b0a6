package framework

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TrafficConfig shapes a client load. Zero values take the defaults.
type TrafficConfig struct {
	Prefix    string        // key prefix of this run (default "/e2e-traffic/")
	Workers   int           // concurrent clients (default 2)
	Interval  time.Duration // pause between a worker's iterations (default 100ms)
	OpTimeout time.Duration // per-request deadline (default 2s)
	// Contended is the share (0 to 1) of iterations that, instead of writing a new key,
	// make one request on a few keys all workers share: an overwriting put, a
	// linearizable get, a delete, or a compare-and-swap txn on the key's mod revision.
	// Those exercise what write-once keys cannot (overwrites, deletes, conditional
	// writes) for the linearizability check. 0, the default, keeps the write-once load.
	Contended     float64
	ContendedKeys int // how many shared keys (default 4)
}

// Traffic writes and reads keys continuously, one goroutine per worker, and records
// every request. Each iteration puts a new key (written exactly once, so a lost write
// is detectable) and reads back a random key the worker wrote before; or, with
// TrafficConfig.Contended, makes one request on a shared key.
type Traffic struct {
	cfg    TrafficConfig
	client *clientv3.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	history History
}

var runs atomic.Int64

// runPrefix is a run's own key prefix under the configured one.
func runPrefix(prefix string) string {
	return fmt.Sprintf("%sr%d-%x/", prefix, runs.Add(1), time.Now().UnixNano())
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
		// 100 ms: with a put and a get per iteration, two workers make about 30 requests a
		// second, one every ~30 ms, so a member unavailable for a tenth of a second still meets
		// several. The load's cost is mostly etcd's fsyncs, in proportion to the rate: at 20 ms
		// (120 a second) one load cost a settled 3-member cluster 0.54 of a core, at 50 ms 0.27
		// (measured side by side on the suite's machine). The suite runs several loads at once
		// on 2 cores and its scenarios are CPU-bound (5 % idle at 50 ms, CI on 1c5e7a4), so each
		// load's CPU is taken from the Pod starts and reconciles the scenarios wait for.
		cfg.Interval = 100 * time.Millisecond
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = 2 * time.Second
	}
	if cfg.ContendedKeys <= 0 {
		cfg.ContendedKeys = 4
	}
	// Each run writes under keys of its own. The linearizability check models every shared key
	// as absent when the run starts: a second run on the same cluster (a chained roll) that found
	// the first run's values there was judged not linearizable while etcd was right.
	cfg.Prefix = runPrefix(cfg.Prefix)
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
	var written []string          // keys this worker got acknowledged
	modRevs := map[string]int64{} // the mod revision this worker last saw of each shared key
	for seq := 0; ctx.Err() == nil; seq++ {
		if t.cfg.Contended > 0 && rand.Float64() < t.cfg.Contended {
			t.contended(ctx, w, seq, modRevs)
			select {
			case <-ctx.Done():
			case <-time.After(t.cfg.Interval):
			}
			continue
		}
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
	if err == nil {
		op.Revision = resp.Header.Revision
	}
	t.finish(ctx, &op, err)
	t.record(op)
	return err == nil
}

// finish records a request's error. A write that failed may or may not have been applied
// (a timeout or a lost connection says nothing about whether the proposal committed), so it
// is marked Unknown: the linearizability check lets it take effect or not. Every failed
// write counts as unknown, even the few errors that prove it was refused: that can only
// make the check more permissive, never report a violation that is not one.
func (t *Traffic) finish(ctx context.Context, op *Op, err error) {
	if err == nil {
		return
	}
	op.Err = err.Error()
	if ctx.Err() != nil {
		// Stopped mid-request: not a result of the system under test. It may still
		// have been applied, so it stays in the history as unacknowledged.
		op.Err = stoppedPrefix + op.Err
	}
	op.Unknown = op.Kind != OpGet
}

// contended makes one request on a random shared key: put 30%, get 30%, compare-and-swap
// 30% (on the mod revision this worker last saw of the key), delete 10%.
func (t *Traffic) contended(ctx context.Context, w, seq int, modRevs map[string]int64) {
	key := fmt.Sprintf("%scontended/%d", t.cfg.Prefix, rand.IntN(t.cfg.ContendedKeys))
	// Unique values, so a read names the write it saw.
	val := fmt.Sprintf("c-%d-%d-%d", w, seq, time.Now().UnixNano())
	op := Op{Worker: w, Key: key, Contended: true, Start: time.Now()}
	rctx, cancel := context.WithTimeout(ctx, t.cfg.OpTimeout)
	defer cancel()
	var err error
	switch n := rand.IntN(10); {
	case n < 3:
		op.Kind, op.Value = OpPut, val
		var resp *clientv3.PutResponse
		if resp, err = t.client.Put(rctx, key, val); err == nil {
			op.Revision = resp.Header.Revision
			modRevs[key] = resp.Header.Revision
		}
	case n < 6:
		op.Kind = OpGet
		var resp *clientv3.GetResponse
		if resp, err = t.client.Get(rctx, key); err == nil {
			op.Revision = resp.Header.Revision
			op.Found, op.Value, op.ModRevision = found(resp.Kvs)
			modRevs[key] = op.ModRevision
		}
	case n < 9:
		op.Kind, op.Value, op.Compare = OpTxn, val, modRevs[key]
		var resp *clientv3.TxnResponse
		resp, err = t.client.Txn(rctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", op.Compare)).
			Then(clientv3.OpPut(key, val)).
			Else(clientv3.OpGet(key)).
			Commit()
		if err == nil {
			op.Revision, op.Succeeded = resp.Header.Revision, resp.Succeeded
			if resp.Succeeded {
				modRevs[key] = resp.Header.Revision
			} else if len(resp.Responses) == 1 && resp.Responses[0].GetResponseRange() != nil {
				op.Found, op.Value, op.ModRevision = found(resp.Responses[0].GetResponseRange().Kvs)
				modRevs[key] = op.ModRevision
			} else {
				err = fmt.Errorf("txn failed its comparison without the else-get's response: %v", resp.Responses)
			}
		}
	default:
		op.Kind = OpDelete
		var resp *clientv3.DeleteResponse
		if resp, err = t.client.Delete(rctx, key); err == nil {
			op.Revision, op.Deleted = resp.Header.Revision, resp.Deleted
			modRevs[key] = 0
		}
	}
	op.End = time.Now()
	t.finish(ctx, &op, err)
	t.record(op)
}

func found(kvs []*mvccpb.KeyValue) (ok bool, value string, modRev int64) {
	if len(kvs) == 0 {
		return false, "", 0
	}
	return true, string(kvs[0].Value), kvs[0].ModRevision
}

func (t *Traffic) get(ctx context.Context, w int, key string) {
	op := Op{Worker: w, Kind: OpGet, Key: key, Start: time.Now()}
	rctx, cancel := context.WithTimeout(ctx, t.cfg.OpTimeout)
	resp, err := t.client.Get(rctx, key) // linearizable by default
	cancel()
	op.End = time.Now()
	if err == nil {
		op.Revision = resp.Header.Revision
		op.Found, op.Value, op.ModRevision = found(resp.Kvs)
	}
	t.finish(ctx, &op, err)
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
