package datacheck

import (
	"bytes"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeWAL writes a data directory whose first WAL file names member id, in etcd's framing.
func fakeWAL(t *testing.T, id uint64) string {
	t.Helper()
	dir := t.TempDir()
	wal := filepath.Join(dir, "member", "wal")
	if err := os.MkdirAll(wal, 0o700); err != nil {
		t.Fatal(err)
	}
	meta := appendVarintField(nil, metaNodeID, id)
	meta = appendVarintField(meta, 2, 0xc1)
	var rec []byte
	rec = appendVarintField(rec, recType, metadataType)
	rec = append(rec, byte(recData<<3|2), byte(len(meta)))
	rec = append(rec, meta...)
	crc := appendVarintField(nil, recType, 4) // the crc record comes first
	var file []byte
	for _, r := range [][]byte{crc, rec} {
		pad := (8 - len(r)%8) % 8
		l := uint64(len(r))
		if pad > 0 {
			l |= uint64(0x80|pad) << 56
		}
		for i := range 8 {
			file = append(file, byte(l>>(8*i)))
		}
		file = append(file, r...)
		file = append(file, make([]byte, pad)...)
	}
	if err := os.WriteFile(filepath.Join(wal, "0000000000000000-0000000000000000.wal"), file, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func appendVarintField(b []byte, num int, v uint64) []byte {
	b = append(b, byte(num<<3))
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func TestDecide(t *testing.T) {
	empty, own, other := t.TempDir(), fakeWAL(t, 0xabc), fakeWAL(t, 0xdef)
	started := filepath.Join(t.TempDir(), "started")
	if err := os.WriteFile(started, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		o    RunOptions
		want string // "" allowed, else the verdict
	}{
		{"a new learner's first start on an empty directory", RunOptions{DataDir: empty, MemberID: "abc"}, ""},
		{"a bootstrapping seed", RunOptions{DataDir: empty}, ""},
		{"its own data", RunOptions{DataDir: own, MemberID: "abc", ExpectData: true, Marker: started}, ""},
		{"a seed's restart, ID not recorded", RunOptions{DataDir: own, Marker: started}, ""},
		{"another member's data", RunOptions{DataDir: other, MemberID: "abc"}, Foreign},
		{"a voter's new Pod on an empty PVC", RunOptions{DataDir: empty, MemberID: "abc", ExpectData: true}, Empty},
		{"emptied under a running Pod (restart in place)", RunOptions{DataDir: empty, MemberID: "abc", Marker: started}, Empty},
		{"a seed emptied under it", RunOptions{DataDir: empty, Marker: started}, Empty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Decide(tt.o)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want+": ")):
				t.Fatalf("Decide = %v, want %s", err, tt.want)
			}
		})
	}
}

// TestMain doubles as the "etcd" the wrapper runs (DATACHECK_CHILD set): "die" exits 1 at once,
// like a learner that cannot join yet; "wal" waits for a go file, renames a prepared member
// directory into the data directory as etcd does, then exits 7 on SIGTERM. Asked --version, it
// answers as etcd does with DATACHECK_ETCD_VERSION, or fails when that is unset.
func TestMain(m *testing.M) {
	if os.Getenv("DATACHECK_CHILD") != "" && len(os.Args) > 1 && os.Args[1] == "--version" {
		v := os.Getenv("DATACHECK_ETCD_VERSION")
		if v == "" {
			os.Exit(2)
		}
		fmt.Printf("etcd Version: %s\nGit SHA: 0000000\nGo Version: go1.26\nGo OS/Arch: linux/amd64\n", v)
		os.Exit(0)
	}
	switch os.Getenv("DATACHECK_CHILD") {
	case "":
		os.Exit(m.Run())
	case "die":
		os.Exit(1)
	case "wal":
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		for {
			if _, err := os.Stat(os.Getenv("DATACHECK_GO")); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := os.Rename(os.Getenv("DATACHECK_FROM"), os.Getenv("DATACHECK_TO")); err != nil {
			os.Exit(2)
		}
		<-term
		os.Exit(7)
	}
}

func runArgs(dir, marker, term string, extra ...string) []string {
	return append(append([]string{"--data-dir=" + dir, "--marker=" + marker, "--termination-log=" + term}, extra...),
		"--", os.Args[0], "-test.run=^$")
}

func TestWrapperMarksOnceTheWALExistsAndForwardsSignals(t *testing.T) {
	markPoll = 20 * time.Millisecond
	data, tmp := t.TempDir(), t.TempDir()
	marker, gofile := filepath.Join(tmp, "started"), filepath.Join(tmp, "go")
	t.Setenv("DATACHECK_CHILD", "wal")
	t.Setenv("DATACHECK_GO", gofile)
	t.Setenv("DATACHECK_FROM", filepath.Join(fakeWAL(t, 0xabc), "member"))
	t.Setenv("DATACHECK_TO", filepath.Join(data, "member"))
	code := make(chan int, 1)
	var stderr bytes.Buffer
	go func() { code <- Main(runArgs(data, marker, filepath.Join(tmp, "term"), "--member-id=abc"), &stderr) }()
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("marked before etcd wrote its WAL")
	}
	if err := os.WriteFile(gofile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no marker once the WAL exists (%s)", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Marked, the wrapper stops polling: it stays etcd's parent for the Pod's life, in every member
	// Pod, and a poll every 500 ms for nothing was 0.05 of a core per 100 members.
	time.Sleep(3 * markPoll)
	before := polls.Load()
	time.Sleep(15 * markPoll)
	if n := polls.Load() - before; n > 0 {
		t.Errorf("the wrapper polled %d more times after marking", n)
	}
	// The kubelet's SIGTERM reaches the wrapper (PID 1 in the container), which passes it on.
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-code:
		if c != 7 {
			t.Fatalf("exit %d, want etcd's 7 (%s)", c, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wrapper did not end with etcd")
	}
	// Emptied under the Pod, the next start in place is refused.
	if err := os.RemoveAll(filepath.Join(data, "member")); err != nil {
		t.Fatal(err)
	}
	if c := Main(runArgs(data, marker, filepath.Join(tmp, "term"), "--member-id=abc"), &stderr); c != ExitDataLost {
		t.Fatalf("emptied after the WAL existed: exit %d", c)
	}
}

// The CI failure of the exec design: a learner's first etcd died before writing its WAL, the Pod
// was marked anyway, and every later start was refused as "emptied".
func TestWrapperLeavesNoMarkWhenEtcdDiesBeforeItsWAL(t *testing.T) {
	markPoll = 20 * time.Millisecond
	data, tmp := t.TempDir(), t.TempDir()
	marker := filepath.Join(tmp, "started")
	t.Setenv("DATACHECK_CHILD", "die")
	var stderr bytes.Buffer
	for i := range 3 {
		if c := Main(runArgs(data, marker, filepath.Join(tmp, "term"), "--member-id=abc"), &stderr); c != 1 {
			t.Fatalf("start %d: exit %d, want etcd's own 1 (%s)", i, c, stderr.String())
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("marked although etcd never wrote a WAL")
	}
}

func TestWrapperReportsForeignData(t *testing.T) {
	dir, tmp := fakeWAL(t, 0xabc), t.TempDir()
	term := filepath.Join(tmp, "termination-log")
	var stderr bytes.Buffer
	if code := Main(runArgs(dir, filepath.Join(tmp, "started"), term, "--member-id=def", "--expect-data"), &stderr); code != ExitDataLost {
		t.Fatalf("foreign data: exit %d (%s)", code, stderr.String())
	}
	msg, _ := os.ReadFile(term)
	if got := DataLost(ExitDataLost, string(msg)); !strings.HasPrefix(got, "Foreign: ") || !strings.Contains(got, "holds member abc's data, not def's") {
		t.Errorf("termination message %q -> %q", msg, got)
	}
	if DataLost(1, string(msg)) != "" || DataLost(ExitDataLost, "panic: something") != "" {
		t.Error("DataLost took another exit for a verdict")
	}
}
