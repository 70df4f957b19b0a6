package datacheck

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// ExitDataLost is the etcd container's exit code when its data directory fails the check (and
// ExitVersionRefused when etcd's version does not fit the data's); the termination message starts
// with MessagePrefix.
const (
	ExitDataLost  = 3
	MessagePrefix = "steward datacheck: "
)

// RunOptions are `steward member run-etcd`'s flags.
type RunOptions struct {
	DataDir string
	// MemberID (hex) the data must belong to; "" before etcd assigned one (a bootstrapping seed).
	MemberID string
	// ExpectData: the member had data before this Pod (it ran as a voter), so an empty directory
	// on the first start is a loss too, not a fresh member.
	ExpectData bool
	// Marker is a file in a volume that lives as long as the Pod: present once this Pod's etcd
	// wrote its WAL, so a container restarted in place needs its data whatever ExpectData says.
	Marker string
	// TerminationLog receives the verdict when the check fails.
	TerminationLog string
	// Etcd is the etcd binary, asked its version when the directory holds data; EtcdVersion, when
	// set, stands for its answer.
	Etcd, EtcdVersion string
	// EtcdArgs are etcd's flags (a --v2-deprecation=write-only-skip-check skips the v2 store check,
	// as etcd itself then does).
	EtcdArgs []string
	// Warn receives what the check could not check (nil: discarded).
	Warn io.Writer
}

// Decide says whether etcd may start on dataDir: nil, or why not.
func Decide(o RunOptions) error {
	var want uint64
	if o.MemberID != "" {
		id, err := strconv.ParseUint(o.MemberID, 16, 64)
		if err != nil {
			return fmt.Errorf("bad --member-id %q: %w", o.MemberID, err)
		}
		want = id
	}
	r, err := Check(o.DataDir, want)
	if err != nil {
		return err
	}
	_, statErr := os.Stat(o.Marker)
	started := o.Marker != "" && statErr == nil
	switch {
	case r.Verdict == Foreign:
		return verdict(r)
	case r.Verdict == Empty && started:
		return verdict(Result{Verdict: Empty, Message: r.Message + " (this Pod's etcd ran before: the directory was emptied under it)"})
	case r.Verdict == Empty && o.ExpectData:
		return verdict(r)
	case r.Verdict == OK:
		return decideVersion(o)
	}
	return nil
}

// decideVersion refuses an etcd its data's storage version does not allow (CheckVersion). An etcd
// that cannot say its version starts unchecked: refusing would crash-loop the member for want of a
// version string, and the planner still holds every rebuild to the member's recorded data version.
func decideVersion(o RunOptions) error {
	v := o.EtcdVersion
	if v == "" && o.Etcd != "" {
		var err error
		if v, err = EtcdVersion(o.Etcd); err != nil {
			o.warnf("%sthe etcd version is unknown, so its step from the data's storage version is not checked: %v", MessagePrefix, err)
			return nil
		}
	}
	if v == "" {
		return nil
	}
	storage, err := StorageVersion(o.DataDir)
	if err != nil {
		return err
	}
	r := CheckVersion(storage, v)
	if r.Verdict != OK {
		return verdict(r)
	}
	if m, ok := minorOf(v); ok && m[0] == 3 && m[1] >= 6 && storage == "" && !slices.Contains(o.EtcdArgs, "--v2-deprecation=write-only-skip-check") {
		where, err := V2CustomContent(o.DataDir)
		if err != nil {
			return err
		}
		if where != "" {
			return verdict(Result{Verdict: VersionRefused, Message: fmt.Sprintf("etcd %s refuses this member's data: "+
				"%s holds custom v2 content (written through the v2 API, --enable-v2), which etcd 3.6 no longer "+
				"serves (the check of `etcdutl check v2store`). The data is intact and etcd 3.5 runs on it: set "+
				"spec.version back, remove the v2 keys, and upgrade again", v, where)})
		}
	}
	if m, ok := minorOf(v); ok && m[0] == 3 && m[1] >= 7 {
		i, err := V2EntryAfterSnapshot(o.DataDir)
		if err != nil {
			return err
		}
		if i > 0 {
			return verdict(Result{Verdict: VersionRefused, Message: fmt.Sprintf("etcd %s cannot replay this member's WAL: "+
				"entry %d, after its latest snapshot, is a v2 request etcd 3.5 wrote (etcd 3.7 applies only v3 requests "+
				"and would exit 1 on every start). The data is intact: etcd 3.6 runs on it, and clears such entries "+
				"with its next snapshot (after spec.options.snapshotCount entries)", v, i)})
		}
	}
	if _, ok := minorOf(v); !ok {
		o.warnf("%s%s", MessagePrefix, r.Message)
	}
	return nil
}

func (o RunOptions) warnf(format string, args ...any) {
	if o.Warn != nil {
		_, _ = fmt.Fprintf(o.Warn, format+"\n", args...)
	}
}

// Verdict is a failed check.
type Verdict struct{ Result Result }

func (v *Verdict) Error() string { return v.Result.Verdict + ": " + v.Result.Message }

func verdict(r Result) error { return &Verdict{Result: r} }

// Main runs `steward member run-etcd [flags] -- etcd [args]`: the check, then etcd as a child
// process, which the wrapper serves as PID 1 does: signals forwarded, etcd's exit code returned.
//
// The wrapper stays etcd's parent (rather than exec'ing it) to mark the Pod as having had data only
// once etcd's WAL exists: a member whose first etcd died before writing its WAL (a learner that
// could not join yet) is still a new member on its next start, not one whose data was lost.
func Main(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("steward member run-etcd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o RunOptions
	fs.StringVar(&o.DataDir, "data-dir", "", "etcd's --data-dir")
	fs.StringVar(&o.MemberID, "member-id", "", "the member ID (hex) the data must belong to")
	fs.BoolVar(&o.ExpectData, "expect-data", false, "the member ran before this Pod: its directory must hold its data")
	fs.StringVar(&o.Marker, "marker", "", "file marking that this Pod's etcd had written its data")
	fs.StringVar(&o.TerminationLog, "termination-log", "/dev/termination-log", "where the verdict goes")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	etcd := fs.Args()
	if len(etcd) == 0 || o.DataDir == "" {
		_, _ = fmt.Fprintln(stderr, "usage: steward member run-etcd --data-dir DIR [--member-id ID] [--expect-data] [--marker FILE] -- etcd [flags]")
		return 2
	}
	o.Etcd, o.EtcdArgs, o.Warn = etcd[0], etcd[1:], stderr
	if err := Decide(o); err != nil {
		msg := MessagePrefix + err.Error()
		_, _ = fmt.Fprintln(stderr, msg)
		var v *Verdict
		if errors.As(err, &v) {
			_ = os.WriteFile(o.TerminationLog, []byte(msg), 0o644)
			if v.Result.Verdict == VersionRefused {
				return ExitVersionRefused
			}
			return ExitDataLost
		}
		return 1
	}
	return supervise(o, etcd, stderr)
}

// DataLost extracts the verdict from an etcd container's termination message; "" when it is not one.
func DataLost(exitCode int32, message string) string {
	return readVerdict(ExitDataLost, exitCode, message)
}

// RefusedVersion extracts a VersionRefused verdict from an etcd container's termination message;
// "" when it is not one. Its data is intact, unlike DataLost's.
func RefusedVersion(exitCode int32, message string) string {
	return readVerdict(ExitVersionRefused, exitCode, message)
}

func readVerdict(want, exitCode int32, message string) string {
	if exitCode != want || !strings.HasPrefix(message, MessagePrefix) {
		return ""
	}
	return strings.TrimPrefix(strings.TrimSpace(message), MessagePrefix)
}
