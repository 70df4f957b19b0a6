// Package selfinstall copies the running binary into a volume, so a container of another image
// (etcd's) can run it: the member wrapper in every member Pod, the snapshot subcommands in restore
// drills. The binaries are static, so they run there as they do here.
package selfinstall

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Install copies the running binary to dest (written aside and renamed, executable), so a half
// copy is never run.
func Install(dest string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	src, err := os.Open(self)
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }()
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return err
	}
	tmp := dest + ".partial"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, src); err != nil {
		_ = out.Close()
		_ = os.Remove(tmp)
		return fmt.Errorf("copying %s to %s: %w", self, dest, err)
	}
	if err := out.Close(); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, dest)
}
