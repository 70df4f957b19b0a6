package datacheck

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// withBackend gives dir a real bbolt backend at member/snap/db, as etcd lays it out: a "meta"
// bucket holding storageVersion when storage is not "" (etcd 3.6+), and none when it is (3.5).
// noMeta leaves the bucket out altogether.
func withBackend(t *testing.T, dir, storage string, noMeta bool) string {
	t.Helper()
	snap := filepath.Join(dir, "member", "snap")
	if err := os.MkdirAll(snap, 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(snap, "db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists([]byte("key")); err != nil {
			return err
		}
		if noMeta {
			return nil
		}
		meta, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		if err := meta.Put([]byte("consistent_index"), make([]byte, 8)); err != nil {
			return err
		}
		if storage == "" {
			return nil
		}
		return meta.Put(storageVersionKey, []byte(storage))
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestStorageVersionFromRealBackends(t *testing.T) {
	for _, tt := range []struct {
		name, storage string
		noMeta        bool
		want          string
	}{
		{"etcd 3.6 data", "3.6.0", false, "3.6.0"},
		{"etcd 3.7 data", "3.7.0", false, "3.7.0"},
		{"etcd 3.5 data: a meta bucket without storageVersion", "", false, ""},
		{"no meta bucket", "", true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := withBackend(t, t.TempDir(), tt.storage, tt.noMeta)
			got, err := StorageVersion(dir)
			if err != nil || got != tt.want {
				t.Fatalf("StorageVersion = %q, %v; want %q", got, err, tt.want)
			}
			// Read-only: the file is what it was, and can be read again at once (no lock left).
			if again, err := StorageVersion(dir); err != nil || again != got {
				t.Fatalf("second read: %q, %v", again, err)
			}
		})
	}
	if got, err := StorageVersion(t.TempDir()); err != nil || got != "" {
		t.Errorf("no backend yet: %q, %v", got, err)
	}
}

// An etcd still holding its backend keeps the lock: the check says so within its timeout rather
// than wait for it, or read a file being written.
func TestStorageVersionDoesNotWaitForALockedBackend(t *testing.T) {
	defer func(d time.Duration) { boltTimeout = d }(boltTimeout)
	boltTimeout = 100 * time.Millisecond
	dir := withBackend(t, t.TempDir(), "3.6.0", false)
	held, err := bolt.Open(filepath.Join(dir, "member", "snap", "db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Close() }()
	start := time.Now()
	_, err = StorageVersion(dir)
	if !errors.Is(err, bolterrors.ErrTimeout) || time.Since(start) > 5*time.Second {
		t.Fatalf("locked backend: %v after %s", err, time.Since(start))
	}
}

func TestCheckVersion(t *testing.T) {
	for _, tt := range []struct {
		storage, etcd string
		refused       bool
		why           string
	}{
		{"", "3.5.35", false, ""},
		{"", "3.6.16", false, ""}, // 3.5 data, one minor up: the 3.5 → 3.6 roll
		{"", "3.7.3", true, "one minor version at a time: run etcd 3.6 first"},
		{"", "3.4.30", false, ""}, // none recorded: 3.5's or older, maybe 3.4's
		{"3.6.0", "3.6.16", false, ""},
		{"3.6.0", "3.7.3", false, ""},
		{"3.6.0", "3.5.35", true, "older than its data"},
		{"3.6.0", "3.8.0", true, "run etcd 3.7 first"},
		{"3.7.0", "3.6.16", true, "downgrade process"},
		{"3.6.0", "4.0.0", true, "another major"},
		{"3.6", "v3.7.0-rc.1", false, ""},
		{"garbage", "3.6.16", false, ""}, // etcd reads an unparseable value as none: 3.5
		{"3.6.0", "main-abcdef", false, ""},
	} {
		r := CheckVersion(tt.storage, tt.etcd)
		if (r.Verdict == VersionRefused) != tt.refused || !strings.Contains(r.Message, tt.why) {
			t.Errorf("etcd %s on storage %q: %+v, want refused=%v (%q)", tt.etcd, tt.storage, r, tt.refused, tt.why)
		}
	}
}

// The brief's three cases through Decide, on real directories: a WAL naming the member and a real
// bbolt backend.
func TestDecideVersion(t *testing.T) {
	v35 := withBackend(t, fakeWAL(t, 0xabc), "", false)
	v36 := withBackend(t, fakeWAL(t, 0xabc), "3.6.0", false)
	for _, tt := range []struct {
		name, dir, etcd string
		refused         bool
	}{
		{"3.5 data started by 3.6 (one minor up)", v35, "3.6.16", false},
		{"3.5 data started by 3.7", v35, "3.7.3", true},
		{"3.6 data started by 3.5 (older than it)", v36, "3.5.35", true},
		{"3.6 data started by 3.7", v36, "3.7.3", false},
		{"a new member's empty directory: nothing to check", t.TempDir(), "3.7.3", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Decide(RunOptions{DataDir: tt.dir, MemberID: "abc", EtcdVersion: tt.etcd})
			var v *Verdict
			switch {
			case !tt.refused && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.refused && (!errors.As(err, &v) || v.Result.Verdict != VersionRefused):
				t.Fatalf("Decide = %v, want %s", err, VersionRefused)
			}
		})
	}
	// Foreign data is told as such, whatever its version: it is replaced, not waited for.
	err := Decide(RunOptions{DataDir: v35, MemberID: "def", EtcdVersion: "3.7.3"})
	if err == nil || !strings.HasPrefix(err.Error(), Foreign+": ") {
		t.Errorf("foreign 3.5 data under 3.7: %v", err)
	}
}

// The wrapper asks the binary its version, exits with its own code and a termination message the
// controller reads as a version refusal, never as lost data; and starts an etcd its data accepts.
func TestWrapperReportsVersionRefused(t *testing.T) {
	dir, tmp := withBackend(t, fakeWAL(t, 0xabc), "", false), t.TempDir()
	term := filepath.Join(tmp, "termination-log")
	t.Setenv("DATACHECK_CHILD", "die")
	t.Setenv("DATACHECK_ETCD_VERSION", "3.7.3")
	var stderr bytes.Buffer
	if code := Main(runArgs(dir, filepath.Join(tmp, "started"), term, "--member-id=abc", "--expect-data"), &stderr); code != ExitVersionRefused {
		t.Fatalf("3.7.3 on 3.5 data: exit %d (%s)", code, stderr.String())
	}
	msg, _ := os.ReadFile(term)
	got := RefusedVersion(ExitVersionRefused, string(msg))
	if !strings.HasPrefix(got, VersionRefused+": ") || !strings.Contains(got, "etcd 3.7.3") || !strings.Contains(got, "3.5 or older") {
		t.Errorf("termination message %q -> %q", msg, got)
	}
	if DataLost(ExitVersionRefused, string(msg)) != "" || RefusedVersion(ExitDataLost, string(msg)) != "" {
		t.Error("a version refusal read as lost data, or the other way round")
	}
	t.Setenv("DATACHECK_ETCD_VERSION", "3.6.16")
	if code := Main(runArgs(dir, filepath.Join(tmp, "started"), term, "--member-id=abc", "--expect-data"), &stderr); code != 1 {
		t.Fatalf("3.6.16 on 3.5 data: exit %d, want the child etcd's own 1 (%s)", code, stderr.String())
	}
	// A binary that cannot say its version is started unchecked, with a warning.
	t.Setenv("DATACHECK_ETCD_VERSION", "")
	stderr.Reset()
	if code := Main(runArgs(dir, filepath.Join(tmp, "started"), term, "--member-id=abc", "--expect-data"), &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "not checked") {
		t.Fatalf("unknown version: exit %d (%s)", code, stderr.String())
	}
}
