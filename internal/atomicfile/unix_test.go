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
	// A regular file and a symlink to one are replaced as before.
	reg := filepath.Join(dir, "reg")
	os.WriteFile(reg, []byte("old"), 0o644)
	for _, p := range []string{reg, filepath.Join(dir, "new")} {
		if err := WriteFile(p, []byte("new")); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(p); string(b) != "new" {
			t.Fatalf("%s: %q", p, b)
		}
	}
	assertOnly(t, dir, "fifo", "new", "reg", "sub", "tofifo")
}
