package datacheck

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// markPoll is how often the wrapper looks for etcd's WAL until it appears (etcd creates it within
// its first second, by renaming a complete directory into place).
var markPoll = 500 * time.Millisecond

// polls counts the wrapper's polls for the WAL, for its test.
var polls atomic.Int64

// supervise runs etcd as a child: every signal the kubelet sends goes on to it, the marker is written
// once the WAL holds this member's data, and etcd's exit status becomes the wrapper's.
func supervise(o RunOptions, argv []string, stderr io.Writer) int {
	want, _ := strconv.ParseUint(o.MemberID, 16, 64) // Decide has parsed it already
	cmd := exec.Command(argv[0], argv[1:]...)
	join := &joinWatch{}
	// etcd's stderr passes through the wrapper to be watched. A failed write to the container's
	// log must not end the copy: etcd would then write to a pipe with no reader and die of SIGPIPE,
	// which it would not have writing to the log directly.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, io.MultiWriter(lenient{os.Stderr}, join)
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		_, _ = fmt.Fprintf(stderr, "%sstarting %s: %v\n", MessagePrefix, argv[0], err)
		return 1
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	tick := time.NewTicker(markPoll)
	defer tick.Stop()
	poll := tick.C
	marked := o.Marker == ""
	for {
		if !marked {
			marked = mark(o, want, stderr)
		}
		if marked && poll != nil {
			// Nothing left to look for: the wrapper now sleeps until a signal or etcd's exit.
			tick.Stop()
			poll = nil
		}
		select {
		case s := <-sigs:
			_ = cmd.Process.Signal(s)
		case <-done:
			return exited(o, cmd.ProcessState, join, stderr)
		case <-poll:
			polls.Add(1)
		}
	}
}

// mark writes the marker when the directory holds this member's WAL; false while it does not yet.
func mark(o RunOptions, want uint64, stderr io.Writer) bool {
	if r, err := Check(o.DataDir, want); err != nil || r.Verdict != OK {
		return false
	}
	if err := os.WriteFile(o.Marker, []byte("wal\n"), 0o644); err != nil {
		// Without the marker, a later restart in place on an emptied directory is not caught for a
		// member that had no data before this Pod: say so, keep etcd running.
		_, _ = fmt.Fprintf(stderr, "%smarking that the WAL exists: %v\n", MessagePrefix, err)
	}
	return true
}

// lenient is a writer whose failures are dropped: the bytes are lost, the stream goes on.
type lenient struct{ w io.Writer }

func (l lenient) Write(p []byte) (int, error) {
	_, _ = l.w.Write(p)
	return len(p), nil
}

// exited is the wrapper's exit status once etcd exited: etcd's own, or ExitJoinRefused with the
// cause as the termination message when etcd gave up joining (see joinWatch).
func exited(o RunOptions, ps *os.ProcessState, join *joinWatch, stderr io.Writer) int {
	status := exitStatus(ps)
	if status == 0 {
		return 0
	}
	msg := join.verdict()
	if msg == "" {
		return status
	}
	_, _ = fmt.Fprintln(stderr, msg)
	if o.TerminationLog != "" {
		_ = os.WriteFile(o.TerminationLog, []byte(msg), 0o644)
	}
	return ExitJoinRefused
}

// exitStatus is the shell's convention: the code, or 128+signal for a child killed by a signal.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
