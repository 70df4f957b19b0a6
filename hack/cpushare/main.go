// Command cpushare records which processes use the machine's CPU while it runs: every -every it
// reads each process's user and system time from /proc (github.com/prometheus/procfs) and adds
// what each used since the last look to its group, and on every look rewrites -out with the
// totals, so a run stopped by SIGTERM, or killed, still leaves them. hack/e2e.sh runs it beside
// each phase: the suite runs CPU-bound on CI's 2 cores, so its time is its CPU, and this says whose.
//
// A group is the process's command name, except that etcd is split into the control plane's
// (the local Kubernetes' own store) and the members', and kernel threads are grouped by kind.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

func main() {
	out := flag.String("out", "", "file the totals are written to (required)")
	every := flag.Duration("every", 2*time.Second, "how often /proc is read")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "cpushare: -out is required")
		os.Exit(2)
	}
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cpushare:", err)
		os.Exit(1)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	r := recorder{fs: fs, seen: map[procKey]float64{}, used: map[string]float64{}, start: time.Now()}
	r.look(true)
	r.firstIdle = r.idle()
	tick := time.NewTicker(*every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			r.look(false)
			r.write(*out)
			return
		case <-tick.C:
			r.look(false)
			r.write(*out)
		}
	}
}

// procKey tells a process from a later one that got the same PID.
type procKey struct {
	pid       int
	starttime uint64
}

type recorder struct {
	fs        procfs.FS
	seen      map[procKey]float64 // CPU seconds each process had used at the last look
	used      map[string]float64  // CPU seconds per group since the start
	start     time.Time
	firstIdle float64
}

// look adds what every process used since the last look. A process that started and ended
// between two looks is missed: the period is short against the suite's processes.
func (r *recorder) look(first bool) {
	procs, err := r.fs.AllProcs()
	if err != nil {
		return
	}
	now := map[procKey]float64{}
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil {
			continue // ended meanwhile
		}
		k := procKey{p.PID, st.Starttime}
		t := st.CPUTime()
		now[k] = t
		if first {
			continue
		}
		before, known := r.seen[k]
		if !known {
			before = 0 // started since the last look: all of its time is new
		}
		if d := t - before; d > 0 {
			r.used[group(p, st.Comm)] += d
		}
	}
	r.seen = now
}

func group(p procfs.Proc, comm string) string {
	switch {
	case comm == "etcd":
		if args, err := p.CmdLine(); err == nil && strings.Contains(strings.Join(args, " "), "--name localkube") {
			return "etcd (control plane)"
		}
		return "etcd (members)"
	case strings.HasPrefix(comm, "kworker/"):
		return "kworker (kernel)"
	case strings.HasPrefix(comm, "ksoftirqd/"), strings.HasPrefix(comm, "rcu_"), strings.HasPrefix(comm, "migration/"):
		return "other kernel threads"
	}
	return comm
}

// idle is the machine's idle and iowait time so far, in CPU seconds.
func (r *recorder) idle() float64 {
	s, err := r.fs.Stat()
	if err != nil {
		return 0
	}
	return s.CPUTotal.Idle + s.CPUTotal.Iowait
}

func (r *recorder) write(path string) {
	el := time.Since(r.start).Seconds()
	type row struct {
		name string
		sec  float64
	}
	var rows []row
	total := 0.0
	for n, s := range r.used {
		rows = append(rows, row{n, s})
		total += s
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].sec > rows[j].sec })
	var b strings.Builder
	cores := runtime.NumCPU()
	idle := r.idle() - r.firstIdle
	fmt.Fprintf(&b, "%.0f s; processes used %.0f CPU-s (%.2f of %d cores); machine idle %.0f%%\n",
		el, total, total/el, cores, 100*idle/(el*float64(cores)))
	for i, x := range rows {
		if i == 20 {
			break
		}
		fmt.Fprintf(&b, "%9.1f CPU-s %5.1f%%  %s\n", x.sec, 100*x.sec/total, x.name)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err == nil {
		_ = os.Rename(tmp, path)
	}
}
