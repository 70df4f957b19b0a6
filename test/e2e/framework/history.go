package framework

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// OpKind is the kind of a client request the traffic generator made.
type OpKind string

const (
	OpPut    OpKind = "put"
	OpGet    OpKind = "get"
	OpDelete OpKind = "delete"
	// OpTxn is a compare-and-swap on a contended key:
	// If(ModRevision(Key) == Compare).Then(Put(Key, Value)).Else(Get(Key)).
	OpTxn OpKind = "txn"
)

// Op is one client request as the client saw it. For a put, Value is what was
// written; for a get, what was read ("" and Found=false when the key was absent); for a
// txn, what it wrote or, when its comparison failed, what its else-get read.
// Err is empty when etcd acknowledged the request.
type Op struct {
	Worker   int
	Kind     OpKind
	Key      string
	Value    string
	Found    bool
	Revision int64 // response header revision of a successful request
	Start    time.Time
	End      time.Time
	Err      string

	// Contended: the key is one of the few keys every worker overwrites, reads, deletes and
	// compares-and-swaps (TrafficConfig.Contended). Such writes are not write-once, so they
	// take no part in the lost-write and stale-read checks, only in the linearizability check.
	Contended bool
	// Unknown: a write that failed (timeout, unavailable, stopped, …) may or may not have
	// been applied; the linearizability check treats it as pending forever.
	Unknown bool
	// ModRevision of the key a successful get (or a failed txn's else-get) found.
	ModRevision int64
	// Compare is the mod revision a txn required (0: the key must be absent).
	Compare int64
	// Succeeded: the txn's comparison held and its put was applied.
	Succeeded bool
	// Deleted is the number of keys a successful delete removed (0 or 1).
	Deleted int64
}

// OK reports whether etcd acknowledged the request.
func (o Op) OK() bool { return o.Err == "" }

// Latency is the request's duration as the client measured it.
func (o Op) Latency() time.Duration { return o.End.Sub(o.Start) }

// History is every request of a traffic run, in completion order per worker.
type History []Op

// Acknowledged are the successful puts of write-once keys: writes etcd promised to keep.
// A failed put (timeout, unavailable) may or may not have been applied; it proves nothing
// either way. Writes of contended keys are overwritten by design and are not counted.
func (h History) Acknowledged() []Op {
	var out []Op
	for _, o := range h {
		if o.Kind == OpPut && o.OK() && !o.Contended {
			out = append(out, o)
		}
	}
	return out
}

// Failed are the requests that got an error from the system under test. Requests cut short
// because the generator itself was stopping ("stopped: …") are not failures of anything.
func (h History) Failed() []Op {
	var out []Op
	for _, o := range h {
		if !o.OK() && !strings.HasPrefix(o.Err, stoppedPrefix) {
			out = append(out, o)
		}
	}
	return out
}

// stoppedPrefix marks a request interrupted by Traffic.Stop.
const stoppedPrefix = "stopped: "

// LostWrites compares the acknowledged writes with the final contents of the key
// space (key -> value, read after the run). The generator writes every key exactly
// once, so an acknowledged put whose key is missing or holds another value was lost.
func (h History) LostWrites(final map[string]string) []Op {
	var lost []Op
	for _, o := range h.Acknowledged() {
		if v, ok := final[o.Key]; !ok || v != o.Value {
			lost = append(lost, o)
		}
	}
	return lost
}

// StaleReads are successful gets that missed a write acknowledged before the get
// started: etcd reads are linearizable, so each one is a bug (or a lost write).
func (h History) StaleReads() []Op {
	acked := map[string]Op{}
	for _, o := range h.Acknowledged() {
		acked[o.Key] = o
	}
	var stale []Op
	for _, o := range h {
		if o.Kind != OpGet || !o.OK() || o.Contended {
			continue
		}
		w, ok := acked[o.Key]
		if ok && w.End.Before(o.Start) && (!o.Found || o.Value != w.Value) {
			stale = append(stale, o)
		}
	}
	return stale
}

// Latencies of the successful requests of the given kinds (all kinds when none given).
func (h History) Latencies(kinds ...OpKind) []time.Duration {
	var out []time.Duration
	for _, o := range h {
		if o.OK() && (len(kinds) == 0 || containsKind(kinds, o.Kind)) {
			out = append(out, o.Latency())
		}
	}
	return out
}

func containsKind(kinds []OpKind, k OpKind) bool {
	for _, x := range kinds {
		if x == k {
			return true
		}
	}
	return false
}

// Percentile returns the p-th percentile (0 < p <= 100) by the nearest-rank method:
// the smallest sample such that at least p% of the samples are <= it. Zero for no samples.
func Percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), samples...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// LongestGap is the longest interval in which no request succeeded: the client-visible
// unavailability of a run (e.g. a leader election), between the first and last success.
func (h History) LongestGap() (gap time.Duration, from time.Time) {
	var ends []time.Time
	for _, o := range h {
		if o.OK() {
			ends = append(ends, o.End)
		}
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i].Before(ends[j]) })
	for i := 1; i < len(ends); i++ {
		if d := ends[i].Sub(ends[i-1]); d > gap {
			gap, from = d, ends[i-1]
		}
	}
	return gap, from
}

// Summary is a one-line report for test logs: counts, errors, latency percentiles.
func (h History) Summary() string {
	lat := h.Latencies()
	gap, _ := h.LongestGap()
	errs := map[string]int{}
	for _, o := range h.Failed() {
		errs[shortErr(o.Err)]++
	}
	var e []string
	for k, n := range errs {
		e = append(e, fmt.Sprintf("%dx %s", n, k))
	}
	sort.Strings(e)
	return fmt.Sprintf("%d requests, %d acknowledged writes, %d failed [%s]; latency p50=%s p90=%s p99=%s max=%s; longest gap without success %s",
		len(h), len(h.Acknowledged()), len(h.Failed()), strings.Join(e, "; "),
		Percentile(lat, 50), Percentile(lat, 90), Percentile(lat, 99), Percentile(lat, 100), gap.Round(time.Millisecond))
}

func shortErr(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
