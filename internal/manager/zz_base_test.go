package manager_test

import (
	"context"
	"flag"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/manager"
	"github.com/etcd-steward/steward/internal/testenv"
)

func TestZZBaseline(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	var o manager.Options
	fs := flag.NewFlagSet("steward", flag.ContinueOnError)
	o.BindFlags(fs)
	_ = fs.Parse([]string{"--health-probe-bind-address=0", "--metrics-bind-address=0"})
	mgr, err := manager.New(env.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = mgr.Start(ctx) }()
	<-mgr.Elected()
	time.Sleep(5 * time.Second)
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	t.Logf("ZZ heapAlloc %.1f MiB heapInuse %.1f sys %.1f stack %.1f goroutines %d", float64(m.HeapAlloc)/(1<<20), float64(m.HeapInuse)/(1<<20), float64(m.Sys)/(1<<20), float64(m.StackInuse)/(1<<20), runtime.NumGoroutine())
	fh, _ := os.Create("/tmp/base-heap.pprof")
	_ = pprof.WriteHeapProfile(fh)
	_ = fh.Close()
}
