package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/etcd-steward/steward/internal/pitr"
	"github.com/etcd-steward/steward/internal/segstore"
	"github.com/etcd-steward/steward/internal/streamer"
)

// StreamPort is where `steward stream` serves /progress.
const StreamPort = 8080

// Stream runs `steward stream`: the continuous backup of one cluster, until ctx ends.
func Stream(ctx context.Context, args []string, env func(string) string, stderr io.Writer) int {
	logf := func(format string, a ...any) {
		_, _ = fmt.Fprintf(stderr, "%s steward stream: %s\n", time.Now().UTC().Format(time.RFC3339), fmt.Sprintf(format, a...))
	}
	fs := flag.NewFlagSet("steward stream", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var dest destination
	var ef etcdFlags
	dest.bind(fs)
	ef.bind(fs)
	prefix := fs.String("prefix", "", "the cluster's key in the store (<namespace>/<cluster>)")
	interval := fs.Duration("segment-interval", streamer.DefaultInterval, "close a segment this long after its first revision")
	maxMiB := fs.Int("segment-max-mib", streamer.DefaultMaxBytes>>20, "close a segment at this size")
	listen := fs.String("listen", fmt.Sprintf(":%d", StreamPort), "address of the /progress endpoint")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *prefix == "" {
		logf("--prefix is required")
		return 2
	}
	store, err := dest.store(env)
	if err != nil {
		logf("%v", err)
		return 2
	}
	cli, err := ef.client()
	if err != nil {
		logf("%v", err)
		return 2
	}
	defer func() { _ = cli.Close() }()

	var mu sync.Mutex
	var prog streamer.Report
	srv := &http.Server{Addr: *listen, ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		b, _ := json.Marshal(prog)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		logf("%v", err)
		return 1
	}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close() }()

	// The restorable ranges come from a listing, refreshed now and then (new bases, retention)
	// and extended by every upload in between.
	var listed time.Time
	relist := func() {
		bases, segs, err := segstore.List(ctx, store, *prefix)
		if err != nil {
			logf("listing %s: %v", *prefix, err)
			return
		}
		mu.Lock()
		prog.Restorable, listed = pitr.Ranges(bases, segs), time.Now()
		mu.Unlock()
		// Retention: segments before the oldest kept base serve no restore any more.
		for _, sg := range pitr.Unreachable(bases, segs) {
			if err := store.Delete(ctx, sg.Key); err != nil {
				logf("deleting %s: %v", store.Location(sg.Key), err)
				return
			}
			logf("deleted %s: it ends before the oldest base", store.Location(sg.Key))
		}
	}
	cfg := streamer.Config{Client: cli, Store: store, Keys: dest.keys, Prefix: *prefix, Interval: *interval, MaxBytes: *maxMiB << 20, Logf: logf,
		Progress: func(p streamer.Progress) {
			if time.Since(listed) > 5*time.Minute {
				relist()
			}
			mu.Lock()
			defer mu.Unlock()
			prog.DurableRevision, prog.DurableTime, prog.HeadRevision, prog.Segments = p.Durable, p.DurableStamp, p.Head, p.Segments
			prog.Waiting = ""
			if n := len(prog.Restorable); n > 0 && p.Durable > prog.Restorable[n-1].To {
				prog.Restorable[n-1].To, prog.Restorable[n-1].ToTime = p.Durable, p.DurableStamp
			}
		}}
	for ctx.Err() == nil {
		relist()
		err := streamer.Run(ctx, cfg)
		if ctx.Err() != nil {
			break
		}
		var hole *streamer.HoleError
		mu.Lock()
		switch {
		case errors.As(err, &hole):
			if prog.Hole != err.Error() {
				prog.Hole, prog.HoleAt = err.Error(), time.Now()
			}
			prog.Waiting = "waiting for a base snapshot newer than the compaction"
		case errors.Is(err, streamer.ErrNoBase):
			prog.Waiting = err.Error()
		default:
			prog.Waiting = fmt.Sprintf("restarting: %v", err)
		}
		mu.Unlock()
		logf("%v; trying again in 10s", err)
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
	}
	logf("stopped at durable revision %d", prog.DurableRevision)
	return 0
}
