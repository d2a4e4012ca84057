//go:build unix

package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A file is never renamed over anything but a regular file.
func TestCommitRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	os.Symlink("fifo", filepath.Join(dir, "tofifo"))
	for _, p := range []string{fifo, sub, filepath.Join(dir, "tofifo")} {
		if err := CheckFile(p); !errors.Is(err, ErrNotRegular) {
			t.Errorf("CheckFile(%s): %v", p, err)
		}
		if err := WriteFile(p, []byte("x")); !errors.Is(err, ErrNotRegular) {
			t.Errorf("WriteFile(%s): %v", p, err)
		}
	}
	fi, err := os.Lstat(fifo)
	if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the fifo was replaced: %v %v", fi.Mode(), err)
	}
	assertOnly(t, sub)
	// A regular file qnnprep wrote is replaced (TestOwnedFiles has the rest).
	reg := filepath.Join(dir, "reg")
	for _, data := range []string{"old", "new"} {
		if err := WriteFile(reg, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(reg); string(b) != data {
			t.Fatalf("%s: %q", reg, b)
		}
	}
	assertOnly(t, dir, MarkerName, "fifo", "reg", "sub", "tofifo")
}
