package selfinstall

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestInstall(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "tools", "steward")
	if err := Install(dest); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	a, _ := os.ReadFile(self)
	b, err := os.ReadFile(dest)
	st, _ := os.Stat(dest)
	if err != nil || !bytes.Equal(a, b) || st.Mode().Perm()&0o111 == 0 {
		t.Errorf("installed copy: %v, same %v, mode %v", err, bytes.Equal(a, b), st.Mode())
	}
	if _, err := os.Stat(dest + ".partial"); !os.IsNotExist(err) {
		t.Errorf("the partial copy is left: %v", err)
	}
}
