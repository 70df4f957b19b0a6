package datacheck

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// VersionRefused is the verdict on an etcd that may not start on the data's storage version. The
// data is intact: the planner must never treat it as lost (it has its own exit code, so DataLost
// never reads it), only the version is wrong.
const (
	VersionRefused     = "VersionRefused"
	ExitVersionRefused = 4
)

// etcd's record of which minor's schema its backend holds (etcd 3.6+: server/storage/schema writes
// "3.6.0" into bucket "meta", key "storageVersion"). 3.4 and 3.5 write none.
var (
	metaBucket        = []byte("meta")
	storageVersionKey = []byte("storageVersion")
)

// boltTimeout bounds waiting for bbolt's file lock. Nothing should hold it (the check runs before
// etcd starts); an etcd still running on the directory would, and must not be started twice.
var boltTimeout = 2 * time.Second

// StorageVersion reads the storage version of the data in dataDir without starting etcd: "" when
// the backend carries none (etcd 3.5's data or older, or no backend yet). The file is opened read
// only, so a check never changes what etcd will find.
func StorageVersion(dataDir string) (string, error) {
	db := filepath.Join(dataDir, "member", "snap", "db")
	if _, err := os.Stat(db); errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	b, err := bolt.Open(db, 0o600, &bolt.Options{ReadOnly: true, Timeout: boltTimeout})
	if err != nil {
		return "", fmt.Errorf("opening %s read-only: %w", db, err)
	}
	defer func() { _ = b.Close() }()
	var v string
	err = b.View(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(metaBucket); meta != nil {
			v = string(meta.Get(storageVersionKey))
		}
		return nil
	})
	return v, err
}

// versionTimeout bounds `etcd --version`, which prints and exits at once.
const versionTimeout = 10 * time.Second

// EtcdVersion asks the etcd binary its version ("etcd Version: 3.6.16" on its first line): the
// binary's word, not the Pod's image tag, which a custom build or a registry mirror can belie.
func EtcdVersion(binary string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), versionTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", binary, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "etcd Version:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%s --version printed no version", binary)
}

// CheckVersion says whether etcd etcdVersion may start on data of storage version storage (""
// for none): etcd upgrades one minor at a time, and since 3.6 refuses a binary older than its data
// (etcd's downgrade process lowers the storage version first; etcd v3.6 upgrade and downgrade
// guides). Data with no storage version is 3.5's or older: 3.6 starts on it, 3.7 does not. An
// etcd version that is not X.Y[.Z] (a custom build) is not checked.
func CheckVersion(storage, etcdVersion string) Result {
	ok := Result{Verdict: OK, Message: fmt.Sprintf("etcd %s may start on data of storage version %s", etcdVersion, storageName(storage))}
	e, parsed := minorOf(etcdVersion)
	if !parsed {
		ok.Message = fmt.Sprintf("etcd version %q is not X.Y.Z: its step from the data's storage version %s is not checked",
			etcdVersion, storageName(storage))
		return ok
	}
	d, known := minorOf(storage)
	if !known {
		d = [2]int{3, 5} // none, or a value etcd itself would not parse and so reads as 3.5's
	}
	refuse := func(why string) Result {
		return Result{Verdict: VersionRefused, Message: fmt.Sprintf("etcd %s refuses data of storage version %s "+
			"(member/snap/db): %s", etcdVersion, storageName(storage), why)}
	}
	switch {
	case e[0] != d[0]:
		return refuse("another major version")
	case e[1] < d[1] && known:
		// Without a storage version the data may be 3.4's as well as 3.5's: an older etcd is the
		// 3.5 downgrade guide's business, not this check's.
		return refuse("the binary is older than its data, and etcd is downgraded only through its downgrade " +
			"process, which lowers the storage version first")
	case e[1] > d[1]+1:
		return refuse(fmt.Sprintf("etcd upgrades one minor version at a time: run etcd %d.%d first", d[0], d[1]+1))
	}
	return ok
}

func storageName(s string) string {
	if s == "" {
		return "3.5 or older (none recorded)"
	}
	return s
}

// minorOf reads major and minor from "3.6", "3.6.0" or "v3.6.16-rc.1".
func minorOf(s string) ([2]int, bool) {
	parts := strings.SplitN(strings.TrimPrefix(s, "v"), ".", 3)
	if len(parts) < 2 {
		return [2]int{}, false
	}
	var v [2]int
	for i := range v {
		n, err := strconv.Atoi(parts[i])
		if err != nil || n < 0 {
			return [2]int{}, false
		}
		v[i] = n
	}
	if len(parts) == 3 {
		patch, _, _ := strings.Cut(strings.SplitN(parts[2], "+", 2)[0], "-")
		if _, err := strconv.Atoi(patch); err != nil {
			return [2]int{}, false
		}
	}
	return v, true
}
