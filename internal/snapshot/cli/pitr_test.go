package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-steward/steward/internal/etcdtest"
	"github.com/etcd-steward/steward/internal/ports"
	"github.com/etcd-steward/steward/internal/replay"
	"github.com/etcd-steward/steward/internal/segment"
	"github.com/etcd-steward/steward/internal/snapshot/snaptest"
	"github.com/etcd-steward/steward/internal/streamer"
)

// `steward stream` and `steward snapshot fetch --pitr-prefix` end to end in process: a base saved by
// the save command, the stream's /progress, then fetches to a revision and to a time whose result
// says which revision was restored, refusals for targets outside the range, and etcdutl restoring
// the replayed file (its hash check on).
func TestStreamAndFetchToAPoint(t *testing.T) {
	c := etcdtest.Start(t, 1)
	vol := t.TempDir()
	env := map[string]string{"GOMEMLIMIT": "off"}
	cli := etcdClient(t, c)
	ctx := tctx(t)
	snaptest.Fill(ctx, t, cli, "/before/", 20, 100)
	save := runCLI(t, env, "save", "--endpoint", c.Members[0].ClientURL, "--volume-dir", vol, "--backup-key", "ns/db/base1")
	if save.code != 0 {
		t.Fatalf("save: %s\n%s", save.raw, save.stderr)
	}
	baseRev := num(t, save, "revision")

	st := startStream(t, ctx, c.Members[0].ClientURL, vol)
	var revs []int64
	var stamps []time.Time
	for i := range 30 {
		resp, err := cli.Put(ctx, fmt.Sprintf("/after/%d", i%7), fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		revs, stamps = append(revs, resp.Header.Revision), append(stamps, time.Now())
		time.Sleep(20 * time.Millisecond)
	}
	last := revs[len(revs)-1]
	waitProgress(t, st.port, last, &st.log)
	prog := progress(st.port)
	if prog.DurableRevision < last || prog.HeadRevision < last || len(prog.Restorable) != 1 ||
		prog.Restorable[0].From != baseRev || prog.Restorable[0].To != prog.DurableRevision {
		t.Fatalf("progress %+v, want durable %d from base %d\n%s", prog, last, baseRev, st.log.String())
	}
	st.finish(t)

	mid := revs[len(revs)/2]
	out := filepath.Join(t.TempDir(), "snapshot.db")
	byRev := runCLI(t, env, "fetch", "--volume-dir", vol, "--pitr-prefix", "ns/db", "--to-revision", fmt.Sprint(mid), "--out", out)
	if byRev.code != 0 || num(t, byRev, "revision") != mid || byRev.result["base"] != "base1" || num(t, byRev, "replayed") != mid-baseRev {
		t.Fatalf("fetch to revision %d: %s\n%s", mid, byRev.raw, byRev.stderr)
	}
	if got := revisionOf(t, out); got != mid {
		t.Errorf("the fetched file is at revision %d, want %d", got, mid)
	}
	restore := runCLI(t, env, "restore", "--snapshot", out, "--stage", t.TempDir(), "--data-dir", filepath.Join(t.TempDir(), "data"),
		"--name", "m0", "--initial-cluster", "m0=http://127.0.0.1:2380", "--initial-cluster-token", "t",
		"--initial-advertise-peer-urls", "http://127.0.0.1:2380", "--bump-revision", "1000", "--etcdutl", snaptest.Etcdutl(t))
	if restore.code != 0 {
		t.Errorf("etcdutl restoring the replayed snapshot: %s\n%s", restore.raw, restore.stderr)
	}

	// A time between two puts maps to the earlier put's revision (stamps are when the streamer
	// saw them, a little after the put returned here).
	i := len(revs) / 3
	at := stamps[i].Add(10 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	byTime := runCLI(t, env, "fetch", "--volume-dir", vol, "--pitr-prefix", "ns/db", "--to-time", at, "--out", filepath.Join(t.TempDir(), "t.db"))
	if byTime.code != 0 {
		t.Fatalf("fetch to time: %s\n%s", byTime.raw, byTime.stderr)
	}
	if got := num(t, byTime, "revision"); got < revs[i-1] || got > revs[i+1] {
		t.Errorf("time %s (put %d at revision %d) restored revision %d", at, i, revs[i], got)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--to-revision", fmt.Sprint(last + 100)}, "is not restorable"},
		{[]string{"--to-revision", fmt.Sprint(baseRev - 1)}, "is not restorable"},
		{[]string{"--to-time", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, "after the last revision recorded"},
		{[]string{"--to-time", "2000-01-01T00:00:00Z"}, "before the first base snapshot"},
		{[]string{"--to-time", "yesterday"}, "want RFC 3339"},
		{[]string{"--to-revision", "5", "--to-time", "2000-01-01T00:00:00Z"}, "exactly one of --to-revision and --to-time"},
	} {
		r := runCLI(t, env, append([]string{"fetch", "--volume-dir", vol, "--pitr-prefix", "ns/db", "--out", filepath.Join(t.TempDir(), "x")}, tc.args...)...)
		if r.code == 0 || !strings.Contains(fmt.Sprint(r.result["error"]), tc.want) {
			t.Errorf("fetch %v: exit %d, %s; want %q", tc.args, r.code, r.raw, tc.want)
		}
	}
}

// revisionOf opens a fetched snapshot file as a replay would and says its revision.
func revisionOf(t *testing.T, path string) int64 {
	t.Helper()
	res, err := replay.Snapshot(context.Background(), path, emptySource{}, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res.From
}

type emptySource struct{}

func (emptySource) Next() (*segment.Revision, *segment.Lease, error) { return nil, nil, io.EOF }

// progress is the streamer's /progress report (empty when it does not answer).
func progress(port int) streamer.Report {
	var prog streamer.Report
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/progress", port))
	if err != nil {
		return prog
	}
	defer func() { _ = resp.Body.Close() }()
	_ = json.NewDecoder(resp.Body).Decode(&prog)
	return prog
}

// etcdClient dials a test cluster, closed with the test.
func etcdClient(t *testing.T, c *etcdtest.Cluster) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.ClientURLs(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// streamRun is `steward stream` run in process against a volume directory.
type streamRun struct {
	port int
	log  bytes.Buffer
	stop context.CancelFunc
	done chan int
}

// startStream runs the stream command from member into vol under prefix ns/db, segments of
// 200 ms, with the extra flags given.
func startStream(t *testing.T, ctx context.Context, member, vol string, extra ...string) *streamRun {
	t.Helper()
	port, err := ports.Free(1)
	if err != nil {
		t.Fatal(err)
	}
	s := &streamRun{port: port[0], done: make(chan int)}
	sctx, stop := context.WithCancel(ctx)
	s.stop = stop
	args := append([]string{"--endpoint", member, "--volume-dir", vol, "--prefix", "ns/db",
		"--segment-interval", "200ms", "--listen", fmt.Sprintf("127.0.0.1:%d", s.port)}, extra...)
	go func() { s.done <- Stream(sctx, args, func(string) string { return "" }, &s.log) }()
	return s
}

// finish stops the streamer and insists it exited cleanly.
func (s *streamRun) finish(t *testing.T) {
	t.Helper()
	s.stop()
	if code := <-s.done; code != 0 {
		t.Fatalf("stream exited %d\n%s", code, s.log.String())
	}
}
