package datacheck

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/etcd-steward/steward/internal/evidence"
)

// etcd 3.6's own lines when every peer refused a joining member's certificate (a peer with
// --peer-cert-allowed-cn), copied from a real run: the cause, then the fatal exit.
const (
	refusedLine = `{"level":"warn","ts":"2026-12-05T00:31:41.178067Z","caller":"etcdserver/cluster_util.go:86","msg":"failed to get cluster response","address":"https://127.0.0.1:23800/members","error":"Get \"https://127.0.0.1:23800/members\": remote error: tls: bad certificate"}`
	gaveUpLine  = `{"level":"fatal","ts":"2026-12-05T00:31:41.179770Z","caller":"etcdmain/etcd.go:183","msg":"discovery failed","error":"cannot fetch cluster info from peer urls: could not retrieve cluster information from the given URLs","stacktrace":"go.etcd.io/etcd/server/v3/etcdmain.startEtcdOrProxyV2\n\tgo.etcd.io/etcd/server/v3@v3.6.16/etcdmain/etcd.go:183"}`
	otherLine   = `{"level":"info","ts":"2026-12-05T00:31:41.179319Z","caller":"embed/etcd.go:426","msg":"closing etcd server","name":"l1"}`
)

func TestJoinWatch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		output string
		want   string // a substring of the verdict; "" for none
	}{
		{"refused, then gave up", refusedLine + "\n" + otherLine + "\n" + gaveUpLine + "\n",
			"the last, https://127.0.0.1:23800, failed with: Get \"https://127.0.0.1:23800/members\": remote error: tls: bad certificate"},
		{"gave up without a cause logged (--log-level error)", gaveUpLine + "\n", ""},
		{"a peer failed once, then etcd joined and exited for another reason", refusedLine + "\n" + otherLine + "\n", ""},
		{"not etcd's JSON", "panic: " + gaveUpLine + "\n" + refusedLine[:40] + "\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Written in small pieces, as a pipe delivers them: lines are split anywhere.
			w := &joinWatch{}
			for s := tc.output; s != ""; {
				n := min(7, len(s))
				if _, err := w.Write([]byte(s[:n])); err != nil {
					t.Fatal(err)
				}
				s = s[n:]
			}
			got := w.verdict()
			if tc.want == "" {
				if got != "" {
					t.Fatalf("verdict %q, want none", got)
				}
				return
			}
			if !strings.Contains(got, tc.want) || !strings.HasPrefix(got, MessagePrefix+JoinRefused+": ") {
				t.Fatalf("verdict %q, want %q in it", got, tc.want)
			}
			read := RefusedJoin(ExitJoinRefused, got)
			if read == "" || !evidence.PeerRefusedCertificate(read) {
				t.Fatalf("RefusedJoin %q: not read back as a refused certificate", read)
			}
			for _, other := range []func(int32, string) string{DataLost, RefusedVersion} {
				if v := other(ExitJoinRefused, got); v != "" {
					t.Fatalf("a join refusal read as another verdict: %q", v)
				}
			}
		})
	}
}

func TestJoinWatchForgetsAnEndlessLine(t *testing.T) {
	w := &joinWatch{maxBytes: 16}
	_, _ = w.Write([]byte(strings.Repeat("x", 100)))
	if len(w.partial) != 0 {
		t.Fatalf("kept %d bytes of a line that never ends", len(w.partial))
	}
	_, _ = w.Write([]byte(refusedLine + "\n" + gaveUpLine + "\n"))
	if w.verdict() == "" {
		t.Fatal("no verdict after the buffer was dropped")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("log pipe closed") }

// A log that fails does not stop the stream: the watcher still sees everything etcd writes.
func TestLenientKeepsTheStreamGoing(t *testing.T) {
	w := &joinWatch{}
	out := io.MultiWriter(lenient{failingWriter{}}, w)
	for _, l := range []string{refusedLine, gaveUpLine} {
		if n, err := out.Write([]byte(l + "\n")); err != nil || n != len(l)+1 {
			t.Fatalf("write: %d, %v", n, err)
		}
	}
	if w.verdict() == "" {
		t.Fatal("the watcher missed etcd's output behind a failing log")
	}
}
