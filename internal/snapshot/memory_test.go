package snapshot

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/objstore"
	"github.com/etcd-steward/steward/internal/objstore/s3test"
)

// peakMeter samples the live heap every millisecond and reads the kernel's peak RSS, around one
// operation.
type peakMeter struct {
	baseHeap, peakHeap, baseRSS uint64
	allocs0                     uint64
	stop                        chan struct{}
	done                        chan struct{}
}

var heapSample = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/allocs:bytes"}}

func readHeap() (live, allocs uint64) {
	s := append([]metrics.Sample(nil), heapSample...)
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

func startMeter(t *testing.T) *peakMeter {
	t.Helper()
	// Give freed memory back to the OS first, so that what the save needs shows as RSS growth
	// rather than as reuse of pages the test's setup left mapped.
	debug.FreeOSMemory()
	m := &peakMeter{stop: make(chan struct{}), done: make(chan struct{})}
	m.baseHeap, m.allocs0 = readHeap()
	// Writing 5 to clear_refs resets the peak RSS (VmHWM) to the current RSS.
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("resetting the peak RSS: %v", err)
	}
	m.baseRSS = procStatus(t, "VmRSS")
	var peak atomic.Uint64
	go func() {
		defer close(m.done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-m.stop:
				m.peakHeap = peak.Load()
				return
			case <-tick.C:
				if live, _ := readHeap(); live > peak.Load() {
					peak.Store(live)
				}
			}
		}
	}()
	return m
}

// end returns the peak live-heap growth, the peak RSS growth and the bytes allocated.
func (m *peakMeter) end(t *testing.T) (heap, rss, allocated uint64) {
	close(m.stop)
	<-m.done
	_, allocs := readHeap()
	return m.peakHeap - min(m.peakHeap, m.baseHeap), procStatus(t, "VmHWM") - min(procStatus(t, "VmHWM"), m.baseRSS), allocs - m.allocs0
}

func procStatus(t *testing.T, field string) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

const mib = 1 << 20

// budget is cli.MemoryBudget (that package imports this one).
const budget = 32 * mib

// Saving a snapshot of 64 MiB and more keeps the process's memory bounded, whatever the database
// size: what a save holds is one multipart part (8 MiB), the encoder (~6 MiB), gRPC's 1 MiB window
// and small buffers; the rest is garbage (every gRPC message of the stream is a new buffer), which
// the garbage collector's pacing lets pile up to the size of the whole heap. The steward binary
// sets a soft memory limit for that reason (cli.MemoryBudget above its start); this test measures a save with a
// limit of what the test process held before it plus the budget, and without one. The figures are
// printed as MEASURE lines.
func TestSaveMemoryIsBounded(t *testing.T) {
	ctx := tctx(t)
	_, cli := startEtcd(t)
	fill(t, cli, "big", 700, 100_000) // ~70 MiB of values
	srv := s3test.Start(t)
	s3, err := objstore.NewS3(objstore.S3Config{Endpoint: srv.Endpoint, Bucket: srv.Bucket, Region: "us-east-1",
		ForcePathStyle: true, AccessKeyID: srv.AccessKey, SecretAccessKey: srv.Secret})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		store   objstore.Store
		c       Compression
		limited bool
	}{
		{"s3 zstd", s3, CompressionZstd, true}, {"s3 none", s3, CompressionNone, true},
		{"volume zstd", volume(t), CompressionZstd, true}, {"s3 zstd, no memory limit", s3, CompressionZstd, false},
	} {
		opts := saveOpts(tc.c)
		opts.Key = "mem/" + strings.NewReplacer(" ", "-", ",", "").Replace(tc.name)
		meter := startMeter(t)
		if tc.limited {
			old := debug.SetMemoryLimit(int64(meter.baseHeap) + budget)
			defer debug.SetMemoryLimit(old)
		}
		start := time.Now()
		m, err := Save(ctx, cli, tc.store, opts)
		took := time.Since(start)
		heap, rss, allocated := meter.end(t)
		if tc.limited {
			debug.SetMemoryLimit(math.MaxInt64)
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.RawSize < 64*mib {
			t.Fatalf("the snapshot is %d bytes; this test is about 64 MiB and more", m.RawSize)
		}
		t.Logf("MEASURE save %s: %.1f MiB snapshot -> %.1f MiB stored in %s (%.0f MiB/s); peak heap +%.1f MiB, peak RSS +%.1f MiB, allocated %.1f MiB",
			tc.name, float64(m.RawSize)/mib, float64(m.Size)/mib, took.Round(time.Millisecond), float64(m.RawSize)/mib/took.Seconds(),
			float64(heap)/mib, float64(rss)/mib, float64(allocated)/mib)
		if tc.limited && (heap > budget || rss > budget+8*mib) {
			t.Errorf("%s: the heap grew by %.1f MiB and RSS by %.1f MiB during the save; the budget is %d MiB", tc.name, float64(heap)/mib, float64(rss)/mib, budget/mib)
		}
	}
}
