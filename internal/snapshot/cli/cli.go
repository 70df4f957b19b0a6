// Package cli is `steward snapshot save|fetch|verify|delete|restore`: the Steward binary run in a backup
// Job or a restore init container. Flags name the member and the destination; S3 credentials come only
// from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, mapped from a
// Secret) and are never printed. The outcome is one JSON line on stdout and in --result-file
// (the container's termination message by default), and the exit code: 0 done, 1 failed,
// 2 bad command line.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// MemoryBudget is how much more memory than at its start a snapshot command lets the Go runtime
// use (a soft limit, unless GOMEMLIMIT is set): a save streams ~100 MiB of short-lived buffers
// per 64 MiB of snapshot, and without a limit the garbage collector lets that garbage grow with
// the heap; with it the process stays near its working set (a multipart part, the encoder, small
// buffers: ~16 MiB) whatever the database size. The binary itself starts at ~40 MiB RSS; give
// the container 128 MiB.
const MemoryBudget = 32 << 20

// DefaultResultFile is where Kubernetes reads a container's termination message.
const DefaultResultFile = "/dev/termination-log"

// MaxResult is Kubernetes' limit on a termination message.
const MaxResult = 4096

// Main runs `steward snapshot <args>` and returns the exit code.
func Main(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	if env("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(goMemory() + MemoryBudget)
	}
	logf := func(format string, a ...any) {
		_, _ = fmt.Fprintf(stderr, "%s steward snapshot: %s\n", time.Now().UTC().Format(time.RFC3339), fmt.Sprintf(format, a...))
	}
	if len(args) == 0 {
		_, _ = fmt.Fprintln(stderr, "usage: steward snapshot save|fetch|verify|delete|restore [flags]  (-h for each)")
		return 2
	}
	var cmd command
	switch args[0] {
	case "save":
		cmd = &saveCmd{}
	case "fetch":
		cmd = &fetchCmd{}
	case "verify":
		cmd = &verifyCmd{}
	case "delete":
		cmd = &deleteCmd{}
	case "restore":
		cmd = &restoreCmd{}
	default:
		_, _ = fmt.Fprintf(stderr, "steward snapshot: unknown command %q: want save, fetch, verify, delete or restore\n", args[0])
		return 2
	}
	fs := flag.NewFlagSet("steward snapshot "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	resultFile := fs.String("result-file", DefaultResultFile, "file to write the JSON result to (besides stdout); Kubernetes shows it as the termination message")
	timeout := fs.Duration("timeout", time.Hour, "give up after this long")
	cmd.bind(fs)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return finish(nil, usageError(err.Error()), *resultFile, resultFileSet(fs), stdout, stderr)
	}
	if fs.NArg() > 0 {
		return finish(nil, usageError(fmt.Sprintf("unexpected arguments %q", fs.Args())), *resultFile, resultFileSet(fs), stdout, stderr)
	}
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	res, err := cmd.run(ctx, env, logf)
	if err != nil && ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("gave up after --timeout %s: %w", *timeout, err)
	}
	return finish(res, err, *resultFile, resultFileSet(fs), stdout, stderr)
}

// goMemory is the memory the Go runtime counts against its limit now.
func goMemory() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64())
}

func resultFileSet(fs *flag.FlagSet) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "result-file" })
	return set
}

// command is one subcommand: its flags and what it does. run returns the JSON result (an object)
// and whether it failed; a failed run may still have a result (a verification that failed).
type command interface {
	bind(fs *flag.FlagSet)
	run(ctx context.Context, env func(string) string, logf func(string, ...any)) (map[string]any, error)
}

// finish writes the result line and returns the exit code.
func finish(res map[string]any, err error, resultFile string, explicit bool, stdout, stderr io.Writer) int {
	code := 0
	if err != nil {
		code = 1
		if isUsage(err) {
			code = 2
		}
		if res == nil {
			res = map[string]any{}
		}
		res["error"] = err.Error()
		_, _ = fmt.Fprintf(stderr, "steward snapshot: %v\n", err)
	}
	line := encodeResult(res)
	_, _ = stdout.Write(line)
	if !explicit {
		// The default path exists only in a container (the kubelet mounts it); elsewhere the
		// result is on stdout, and nothing is created under /dev.
		if _, serr := os.Stat(resultFile); serr != nil {
			return code
		}
	}
	if werr := os.WriteFile(resultFile, line, 0o644); werr != nil {
		_, _ = fmt.Fprintf(stderr, "steward snapshot: writing the result to %s: %v\n", resultFile, werr)
		return max(code, 1)
	}
	return code
}
