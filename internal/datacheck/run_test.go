package datacheck

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

func TestMainExecsEtcdOrReports(t *testing.T) {
	dir, logDir := fakeWAL(t, 0xabc), t.TempDir()
	marker, term := filepath.Join(logDir, "started"), filepath.Join(logDir, "termination-log")
	var ran []string
	exec := func(argv0 string, argv, _ []string) error { ran = append([]string{argv0}, argv...); return nil }
	var stderr bytes.Buffer
	args := []string{"--data-dir=" + dir, "--member-id=abc", "--expect-data", "--marker=" + marker, "--termination-log=" + term,
		"--", "/usr/local/bin/etcd", "--name=m-0"}
	Main(args, &stderr, exec)
	if strings.Join(ran, " ") != "/usr/local/bin/etcd /usr/local/bin/etcd --name=m-0" {
		t.Fatalf("exec %q (%s)", ran, stderr.String())
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("no marker after the first start: %v", err)
	}
	ran = nil
	args[1] = "--member-id=def"
	if code := Main(args, &stderr, exec); code != ExitDataLost || ran != nil {
		t.Fatalf("foreign data: exit %d, ran %q", code, ran)
	}
	msg, _ := os.ReadFile(term)
	if got := DataLost(ExitDataLost, string(msg)); !strings.HasPrefix(got, "Foreign: ") || !strings.Contains(got, "holds member abc's data, not def's") {
		t.Errorf("termination message %q -> %q", msg, got)
	}
	if DataLost(1, string(msg)) != "" || DataLost(ExitDataLost, "panic: something") != "" {
		t.Error("DataLost took another exit for a verdict")
	}
}
