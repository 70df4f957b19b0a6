package framework

import (
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func put(key, val string, start, end int, err string) Op {
	return Op{Kind: OpPut, Key: key, Value: val, Start: at(start), End: at(end), Err: err}
}

func get(key, val string, found bool, start, end int, err string) Op {
	return Op{Kind: OpGet, Key: key, Value: val, Found: found, Start: at(start), End: at(end), Err: err}
}

func TestLostWrites(t *testing.T) {
	h := History{
		put("a", "1", 0, 5, ""),
		put("b", "2", 10, 15, ""),
		put("c", "3", 20, 2020, "context deadline exceeded"), // unacknowledged: may be absent
		put("d", "4", 30, 35, ""),
		put("e", "5", 40, 45, ""),
	}
	final := map[string]string{"a": "1", "b": "2", "d": "other", "x": "unrelated"}
	lost := h.LostWrites(final)
	var keys []string
	for _, o := range lost {
		keys = append(keys, o.Key)
	}
	if got := strings.Join(keys, ","); got != "d,e" {
		t.Fatalf("lost writes = %q, want d (wrong value) and e (missing)", got)
	}
	if n := len(h.Acknowledged()); n != 4 {
		t.Fatalf("acknowledged = %d, want 4", n)
	}
	if n := len(h.Failed()); n != 1 {
		t.Fatalf("failed = %d, want 1", n)
	}
	// A request cut short by stopping the generator is not a failure of etcd.
	if n := len(append(h, put("f", "6", 50, 55, stoppedPrefix+"context canceled")).Failed()); n != 1 {
		t.Fatalf("failed = %d with a stopped request, want 1", n)
	}
	if lost := h.LostWrites(map[string]string{"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"}); len(lost) != 0 {
		t.Fatalf("nothing lost, got %v", lost)
	}
}

func TestStaleReads(t *testing.T) {
	h := History{
		put("a", "1", 0, 10, ""),
		get("a", "1", true, 20, 25, ""),        // fine
		get("a", "", false, 30, 35, ""),        // stale: write acknowledged at 10
		get("a", "", false, 5, 8, ""),          // concurrent with the write: allowed
		get("a", "", false, 40, 45, "timeout"), // failed reads prove nothing
		put("b", "2", 50, 60, "unavailable"),
		get("b", "", false, 70, 75, ""), // write not acknowledged: allowed
	}
	stale := h.StaleReads()
	if len(stale) != 1 || stale[0].Start != at(30) {
		t.Fatalf("stale reads = %+v, want only the read at 30ms", stale)
	}
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	samples := ms(9, 1, 8, 2, 7, 3, 6, 4, 5, 10) // unsorted on purpose
	cases := []struct {
		p    float64
		want int
	}{{50, 5}, {90, 9}, {99, 10}, {100, 10}, {10, 1}, {1, 1}, {0, 1}}
	for _, c := range cases {
		if got := Percentile(samples, c.p); got != time.Duration(c.want)*time.Millisecond {
			t.Errorf("p%v = %v, want %dms", c.p, got, c.want)
		}
	}
	if got := Percentile(nil, 50); got != 0 {
		t.Errorf("p50 of nothing = %v, want 0", got)
	}
	if samples[0] != 9*time.Millisecond {
		t.Error("Percentile must not reorder its input")
	}
}

func TestLatenciesAndGap(t *testing.T) {
	h := History{
		put("a", "1", 0, 10, ""),
		get("a", "1", true, 10, 12, ""),
		put("b", "2", 20, 2020, "deadline"),
		put("c", "3", 2020, 2100, ""),
	}
	if got := h.Latencies(OpPut); len(got) != 2 || got[0] != 10*time.Millisecond || got[1] != 80*time.Millisecond {
		t.Fatalf("put latencies = %v", got)
	}
	if got := h.Latencies(); len(got) != 3 {
		t.Fatalf("all latencies = %v, want the 3 successful requests", got)
	}
	gap, from := h.LongestGap()
	if gap != 2088*time.Millisecond || !from.Equal(at(12)) {
		t.Fatalf("longest gap = %v from %v, want 2.088s from 12ms", gap, from)
	}
	if s := h.Summary(); !strings.Contains(s, "4 requests, 2 acknowledged writes, 1 failed [1x deadline]") {
		t.Fatalf("summary = %q", s)
	}
}

// Writes of the shared keys are overwritten by design: they are no acknowledged writes for the
// lost-write check, and reads of them are not judged by the write-once stale-read check.
func TestContendedOpsLeftToTheLinearizabilityCheck(t *testing.T) {
	c := func(o Op) Op { o.Contended = true; return o }
	h := History{
		put("a", "1", 0, 5, ""),
		c(put("c/0", "x", 10, 15, "")),
		c(put("c/0", "y", 20, 25, "")),
		c(get("c/0", "x", true, 30, 35, "")), // stale, but not for StaleReads to say
	}
	if acked := h.Acknowledged(); len(acked) != 1 || acked[0].Key != "a" {
		t.Fatalf("acknowledged = %+v, want only the write-once put", acked)
	}
	if lost := h.LostWrites(map[string]string{"a": "1"}); len(lost) != 0 {
		t.Fatalf("lost = %+v, want none: the shared key's value is not checked here", lost)
	}
	if stale := h.StaleReads(); len(stale) != 0 {
		t.Fatalf("stale = %+v, want none", stale)
	}
	h[0].Revision, h[1].Revision, h[2].Revision, h[3].Revision, h[3].ModRevision = 1, 2, 3, 3, 2
	if ok, info := CheckLinearizable(h, 10*time.Second); ok || !slices.Equal(info.IllegalKeys, []string{"c/0"}) {
		t.Fatalf("linearizability: %v, want c/0 not linearizable", info)
	}
}
