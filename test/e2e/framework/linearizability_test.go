package framework

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Builders of hand-made histories: worker, key, times in ms, revisions.

func lPut(w int, key, val string, start, end int, rev int64) Op {
	return Op{Worker: w, Kind: OpPut, Key: key, Value: val, Start: at(start), End: at(end), Revision: rev}
}

func lGet(w int, key, val string, start, end int, modRev, rev int64) Op {
	return Op{Worker: w, Kind: OpGet, Key: key, Value: val, Found: true, ModRevision: modRev,
		Start: at(start), End: at(end), Revision: rev}
}

func lAbsent(w int, key string, start, end int, rev int64) Op {
	return Op{Worker: w, Kind: OpGet, Key: key, Start: at(start), End: at(end), Revision: rev}
}

func lDel(w int, key string, start, end int, deleted, rev int64) Op {
	return Op{Worker: w, Kind: OpDelete, Key: key, Deleted: deleted, Start: at(start), End: at(end), Revision: rev}
}

// lCAS succeeded: If(mod == compare).Then(put val), at revision rev.
func lCAS(w int, key, val string, compare int64, start, end int, rev int64) Op {
	return Op{Worker: w, Kind: OpTxn, Key: key, Value: val, Compare: compare, Succeeded: true,
		Start: at(start), End: at(end), Revision: rev}
}

// lCASFailed: the comparison did not hold; the else-get saw seen (found) with seenMod.
func lCASFailed(w int, key string, compare int64, start, end int, seen string, found bool, seenMod, rev int64) Op {
	return Op{Worker: w, Kind: OpTxn, Key: key, Value: seen, Compare: compare, Found: found, ModRevision: seenMod,
		Start: at(start), End: at(end), Revision: rev}
}

// pending: the request timed out; its outcome is unknown.
func pending(o Op) Op {
	o.Err, o.Unknown, o.Revision, o.End = "context deadline exceeded", o.Kind != OpGet, 0, o.Start.Add(2*time.Second)
	return o
}

func TestLinearizabilityHandMade(t *testing.T) {
	cases := []struct {
		name string
		want porcupine.CheckResult
		h    History
	}{
		{"sequential put then get", porcupine.Ok, History{
			lPut(0, "x", "1", 0, 10, 2),
			lGet(1, "x", "1", 20, 30, 2, 2),
		}},
		{"overlapping puts and gets, linearized against real-time order of starts", porcupine.Ok, History{
			lPut(0, "x", "a", 0, 100, 5), // takes effect after b, though it started first
			lPut(1, "x", "b", 10, 50, 4),
			lGet(2, "x", "b", 60, 70, 4, 4),
			lGet(3, "x", "a", 110, 120, 5, 5),
			lGet(1, "x", "b", 55, 105, 4, 4), // concurrent with a: may still see b
		}},
		{"a read concurrent with a write may see either value", porcupine.Ok, History{
			lPut(0, "x", "1", 0, 10, 2),
			lPut(0, "x", "2", 20, 40, 3),
			lGet(1, "x", "1", 15, 30, 2, 2),
			lGet(2, "x", "2", 25, 35, 3, 3),
		}},
		{"a pending put that applied, its revision learned from a read", porcupine.Ok, History{
			lPut(0, "x", "1", 0, 10, 2),
			pending(lPut(0, "x", "2", 20, 0, 0)),
			lGet(1, "x", "2", 30, 40, 3, 3),
			lCAS(1, "x", "3", 3, 50, 60, 4),
			lGet(1, "x", "3", 70, 80, 4, 4),
		}},
		{"a pending put that never applied", porcupine.Ok, History{
			lPut(0, "x", "1", 0, 10, 2),
			pending(lPut(0, "x", "2", 20, 0, 0)),
			lGet(1, "x", "1", 30, 40, 2, 2),
			lGet(1, "x", "1", 5000, 5010, 2, 9),
		}},
		{"a pending put that applied late", porcupine.Ok, History{
			lPut(0, "x", "1", 0, 10, 2),
			pending(lPut(0, "x", "2", 20, 0, 0)),
			lGet(1, "x", "1", 30, 40, 2, 2),
			lGet(1, "x", "2", 5000, 5010, 7, 9),
		}},
		{"compare-and-swaps that fail and succeed correctly", porcupine.Ok, History{
			lPut(0, "x", "1", 0, 10, 2),
			lPut(0, "x", "2", 20, 30, 3),
			lCASFailed(1, "x", 2, 40, 50, "2", true, 3, 3),
			lCAS(1, "x", "4", 3, 60, 70, 4),
			lCASFailed(0, "x", 3, 80, 90, "4", true, 4, 4),
			lGet(0, "x", "4", 100, 110, 4, 4),
		}},
		{"delete, read absent, create with a compare on revision 0", porcupine.Ok, History{
			lPut(0, "x", "1", 0, 10, 2),
			lDel(0, "x", 20, 30, 1, 3),
			lAbsent(1, "x", 40, 50, 3),
			lDel(1, "x", 55, 58, 0, 3),
			lCASFailed(0, "x", 2, 60, 70, "", false, 0, 3),
			lCAS(0, "x", "2", 0, 80, 90, 4),
			lGet(1, "x", "2", 100, 110, 4, 4),
		}},
		{"a pending delete that applied, a pending CAS that could not", porcupine.Ok, History{
			lPut(0, "x", "1", 0, 10, 2),
			pending(lDel(0, "x", 20, 0, 0, 0)),
			pending(lCAS(2, "x", "9", 1, 25, 0, 0)),
			lAbsent(1, "x", 30, 40, 3),
			lAbsent(1, "x", 5000, 5010, 3),
		}},
		{"a delete that found a key only an unseen write of unknown outcome created", porcupine.Ok, History{
			pending(lPut(0, "x", "u", 0, 0, 0)),
			lDel(1, "x", 20, 30, 1, 3),
			lAbsent(1, "x", 40, 50, 3),
		}},
		{"failed reads prove nothing; write-once keys of several workers", porcupine.Ok, History{
			lPut(0, "w0/1", "a", 0, 10, 2),
			lPut(1, "w1/1", "b", 5, 15, 3),
			pending(lGet(0, "w0/1", "zzz", 20, 0, 9, 0)),
			lGet(0, "w0/1", "a", 30, 40, 2, 3),
			lGet(1, "w1/1", "b", 30, 40, 3, 3),
		}},

		{"stale read after an acknowledged overwrite returned", porcupine.Illegal, History{
			lPut(0, "x", "1", 0, 10, 2),
			lPut(0, "x", "2", 20, 30, 3),
			lGet(1, "x", "1", 40, 50, 2, 3),
		}},
		{"CAS that succeeded on a wrong revision", porcupine.Illegal, History{
			lPut(0, "x", "1", 0, 10, 2),
			lPut(0, "x", "2", 20, 30, 3),
			lCAS(1, "x", "3", 2, 40, 50, 4),
		}},
		{"CAS that failed although the revision matched", porcupine.Illegal, History{
			lPut(0, "x", "1", 0, 10, 2),
			lCASFailed(1, "x", 2, 20, 30, "1", true, 2, 2),
		}},
		{"read of a value never written", porcupine.Illegal, History{
			lPut(0, "x", "1", 0, 10, 2),
			lGet(1, "x", "never", 20, 30, 2, 2),
		}},
		{"read of a value whose write had not started", porcupine.Illegal, History{
			lGet(1, "x", "1", 0, 10, 2, 2),
			lPut(0, "x", "1", 20, 30, 2),
		}},
		{"deleted key read back", porcupine.Illegal, History{
			lPut(0, "x", "1", 0, 10, 2),
			lDel(0, "x", 20, 30, 1, 3),
			lGet(1, "x", "1", 40, 50, 2, 3),
		}},
		{"delete that removed an absent key", porcupine.Illegal, History{
			lAbsent(1, "x", 0, 10, 1),
			lDel(0, "x", 20, 30, 1, 3),
		}},
		{"delete that found nothing although the key existed", porcupine.Illegal, History{
			lPut(0, "x", "1", 0, 10, 2),
			lDel(1, "x", 20, 30, 0, 2),
		}},
		{"a read older than the write it follows", porcupine.Illegal, History{
			lPut(0, "x", "1", 0, 10, 2),
			lDel(0, "x", 20, 30, 1, 5),
			lAbsent(1, "x", 40, 50, 4),
		}},
		{"acknowledged write missing from a later read", porcupine.Illegal, History{
			lPut(0, "x", "1", 0, 10, 2),
			lAbsent(1, "x", 20, 30, 2),
		}},
		{"a pending put seen, then unseen", porcupine.Illegal, History{
			lPut(0, "x", "1", 0, 10, 2),
			pending(lPut(0, "x", "2", 20, 0, 0)),
			lGet(1, "x", "2", 30, 40, 3, 3),
			lGet(1, "x", "1", 50, 60, 2, 3),
		}},
		{"write revisions going backwards", porcupine.Illegal, History{
			lPut(0, "x", "1", 0, 10, 5),
			lPut(0, "x", "2", 20, 30, 4),
		}},
		{"a read with the right value but another mod revision", porcupine.Illegal, History{
			lPut(0, "x", "1", 0, 10, 2),
			lGet(1, "x", "1", 20, 30, 7, 7),
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ok, info := CheckLinearizable(c.h, 10*time.Second)
			if info.Result != c.want || ok != (c.want == porcupine.Ok) {
				t.Fatalf("got %v (ok=%v), want %s", info, ok, c.want)
			}
			if c.want == porcupine.Illegal && !slices.Equal(info.IllegalKeys, []string{"x"}) {
				t.Fatalf("illegal keys %v, want [x]", info.IllegalKeys)
			}
		})
	}
}

// A violation on one key among many linearizable ones is found and named, and visualized.
func TestLinearizabilityNamesTheKeyAndVisualizes(t *testing.T) {
	var h History
	for i := range 50 {
		k := fmt.Sprintf("w0/%03d", i)
		h = append(h, lPut(0, k, "v", 100*i, 100*i+10, int64(2+i)), lGet(1, k, "v", 100*i+20, 100*i+30, int64(2+i), int64(2+i)))
	}
	h = append(h, lPut(2, "c/1", "1", 0, 10, 1000), lPut(2, "c/1", "2", 20, 30, 1001), lGet(3, "c/1", "1", 40, 50, 1000, 1001))
	ok, info := CheckLinearizable(h, 10*time.Second)
	if ok || info.Result != porcupine.Illegal || !slices.Equal(info.IllegalKeys, []string{"c/1"}) || info.Keys != 51 || info.Ops != 103 {
		t.Fatalf("got %v, want illegal on c/1 only, 103 operations on 51 keys", info)
	}
	path := filepath.Join(t.TempDir(), "sub", "lin.html")
	if err := info.Visualize(path, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), "<html") || !strings.Contains(string(b), `put(\"2\")`) {
		t.Fatalf("visualization %s: %v, %d bytes", path, err, len(b))
	}
	if fileSafe("TestRoll/3-pvc-resources roll 3-pvc") != "TestRoll_3-pvc-resources_roll_3-pvc" {
		t.Fatalf("fileSafe = %q", fileSafe("TestRoll/3-pvc-resources roll 3-pvc"))
	}
}

func TestOperationsConversion(t *testing.T) {
	h := History{
		lPut(3, "a", "1", 10, 20, 2),
		pending(lPut(1, "a", "2", 30, 0, 0)),
		pending(lGet(1, "a", "2", 40, 0, 0, 0)), // a failed read: left out, and sees nothing
		lGet(0, "a", "1", 5, 50, 2, 2),
		lGet(0, "a", "2", 60, 70, 3, 3),
		pending(lPut(1, "a", "never read", 80, 0, 0)), // unseen: left out
		lDel(2, "a", 70, 95, 1, 4),                    // may have deleted the unseen write
		lDel(2, "a", 1, 4, 0, 1),                      // ended before the unseen write started
		lDel(2, "b", 100, 110, 0, 4),
	}
	ops, pend, unseen := h.Operations()
	if len(ops) != 7 || pend != 1 || unseen != 1 {
		t.Fatalf("%d operations, %d pending, %d unseen; want 7, 1, 1", len(ops), pend, unseen)
	}
	if ops[0].Call != int64(9*time.Millisecond) || ops[0].Return != int64(19*time.Millisecond) || ops[0].ClientId != 3 {
		t.Fatalf("times relative to the earliest call: %+v", ops[0])
	}
	if ops[1].Return != math.MaxInt64 || !ops[1].Output.(kvOutput).Unknown {
		t.Fatalf("pending put not pending: %+v", ops[1])
	}
	if in := ops[4].Input.(kvInput); in.Kind != OpDelete || !in.Unseen {
		t.Fatalf("a delete ending after an unseen write started: %+v, want Unseen", in)
	}
	if ops[5].Input.(kvInput).Unseen || ops[6].Input.(kvInput).Unseen {
		t.Fatalf("deletes before the unseen write, or of another key, marked Unseen: %+v %+v", ops[5], ops[6])
	}
	if ok, info := CheckLinearizable(h, 10*time.Second); !ok {
		t.Fatalf("got %v, want ok", info)
	}
}

// A history porcupine cannot decide in time is Unknown: neither ok nor a violation.
func TestLinearizabilityTimeoutIsUnknown(t *testing.T) {
	h := History{lPut(0, "x", "0", 0, 1, 2)}
	for i := range 40 {
		h = append(h, pending(lPut(i+1, "x", fmt.Sprint("p", i), 2+i, 0, 0)))
	}
	for i := range 40 { // reads of the pending values, in an order no linearization allows
		h = append(h, lGet(50, "x", fmt.Sprint("p", 39-i), 100+20*i, 110+20*i, int64(100+i), int64(100+i)))
	}
	h = append(h, lGet(50, "x", "0", 1000, 1010, 2, 200))
	start := time.Now()
	ok, info := CheckLinearizable(h, 300*time.Millisecond)
	if ok || info.Result == porcupine.Ok {
		t.Fatalf("got %v, want unknown or illegal", info)
	}
	if info.Result != porcupine.Unknown {
		t.Fatalf("got %v, want unknown: 40 pending writes make this history exponential to refute", info)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %s with a 300ms timeout", d)
	}
}

// simulate builds a history that is linearizable by construction: each worker runs requests
// one after another; each request takes effect at a random instant inside its interval, on an
// in-memory store with etcd's revision rules. Some writes time out, applied or not.
func simulate(seed uint64, workers, perWorker int) History {
	r := rand.New(rand.NewPCG(seed, 1))
	type req struct {
		op    Op
		point time.Duration
		apply bool
	}
	var reqs []req
	for w := range workers {
		now := time.Duration(r.IntN(1000)) * time.Microsecond
		for i := range perWorker {
			lat := time.Duration(1+r.IntN(4000)) * time.Microsecond
			o := Op{Worker: w, Start: t0.Add(now), End: t0.Add(now + lat)}
			if r.IntN(2) == 0 {
				o.Key = fmt.Sprintf("w%d/%d", w, i/2) // write-once key, then read back
				o.Kind = []OpKind{OpPut, OpGet}[i%2]
			} else {
				o.Contended, o.Key = true, fmt.Sprintf("c/%d", r.IntN(4))
				o.Kind = []OpKind{OpPut, OpGet, OpGet, OpTxn, OpTxn, OpDelete}[r.IntN(6)]
			}
			o.Value = fmt.Sprintf("v-%d-%d", w, i) // what a put or txn writes
			rq := req{op: o, point: now + time.Duration(r.Int64N(int64(lat)))}
			if o.Kind != OpGet && r.IntN(50) == 0 { // timed out: may or may not apply
				rq.op.Err, rq.op.Unknown, rq.op.End, rq.apply = "timeout", true, rq.op.Start.Add(2*time.Second), r.IntN(2) == 0
				if !rq.apply {
					rq.point = 1 << 62
				}
			}
			reqs = append(reqs, rq)
			now += lat + time.Duration(r.IntN(2000))*time.Microsecond
		}
	}
	sort.SliceStable(reqs, func(i, j int) bool { return reqs[i].point < reqs[j].point })
	type kv struct {
		val string
		mod int64
	}
	store, rev := map[string]kv{}, int64(1)
	lastSeen := map[string]int64{}
	type keyRev struct {
		key string
		rev int64
	}
	told := map[keyRev]bool{} // mod revisions of a key that some response carried
	var h History
	for _, rq := range reqs {
		o := rq.op
		if o.Err != "" && !rq.apply {
			h = append(h, o)
			continue
		}
		written := o.Value
		cur, exists := store[o.Key]
		switch o.Kind {
		case OpPut:
			rev++
			store[o.Key] = kv{o.Value, rev}
			o.Revision = rev
		case OpGet:
			o.Revision, o.Found, o.Value, o.ModRevision = rev, exists, cur.val, cur.mod
			lastSeen[o.Key] = cur.mod
		case OpTxn:
			o.Compare = lastSeen[o.Key]
			if r.IntN(3) == 0 && (cur.mod == 0 || told[keyRev{o.Key, cur.mod}]) {
				o.Compare = cur.mod // the latest revision, if some client was told it
			}
			if cur.mod == o.Compare {
				rev++
				store[o.Key] = kv{o.Value, rev}
				o.Revision, o.Succeeded = rev, true
			} else {
				o.Revision, o.Found, o.Value, o.ModRevision = rev, exists, cur.val, cur.mod
			}
		case OpDelete:
			if exists {
				rev++
				delete(store, o.Key)
				o.Deleted = 1
			}
			o.Revision = rev
		}
		if o.Err != "" { // applied, but the client never learned the outcome
			o.Revision, o.Found, o.ModRevision, o.Succeeded, o.Deleted, o.Value = 0, false, 0, false, 0, written
		} else {
			told[keyRev{o.Key, o.ModRevision}] = true
			if o.Kind == OpPut || o.Succeeded {
				told[keyRev{o.Key, o.Revision}] = true
			}
		}
		h = append(h, o)
	}
	return h
}

// A simulated history of the size a roll produces is checked fast, and corrupting a single read
// in it is caught.
func TestLinearizabilitySimulated(t *testing.T) {
	for seed := range uint64(2) {
		h := simulate(seed, 4, 2500)
		ok, info := CheckLinearizable(h, 20*time.Second)
		t.Logf("seed %d: %s", seed, info)
		if !ok {
			t.Fatalf("seed %d: a history linearizable by construction was judged %v", seed, info)
		}
		if info.Duration > 5*time.Second {
			t.Errorf("checking %d operations took %s", info.Ops, info.Duration)
		}
		// Corrupt the last successful contended read that found a value: make it see the
		// value of the first write to the key, long overwritten.
		first := map[string]Op{}
		for _, o := range h {
			if _, ok := first[o.Key]; !ok && o.Kind == OpPut && o.OK() {
				first[o.Key] = o
			}
		}
		bad := slices.Clone(h)
		for i := len(bad) - 1; i >= 0; i-- {
			o := bad[i]
			if w, ok := first[o.Key]; ok && o.Contended && o.Kind == OpGet && o.OK() && o.Found && o.Value != w.Value {
				bad[i].Value, bad[i].ModRevision = w.Value, w.Revision
				break
			}
		}
		ok, info = CheckLinearizable(bad, 20*time.Second)
		t.Logf("seed %d, one stale read: %s", seed, info)
		if ok || info.Result != porcupine.Illegal {
			t.Fatalf("seed %d: a stale read went unnoticed: %v", seed, info)
		}
	}
}
