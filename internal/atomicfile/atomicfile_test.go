package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFileCommitAndAbort(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.bin")

	f, err := Create(out)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("partial"))
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("final name exists before commit: %v", err)
	}
	f.Abort()
	assertOnly(t, dir)

	if err := WriteFile(out, []byte("done")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	if string(b) != "done" {
		t.Fatalf("content %q", b)
	}
	assertOnly(t, dir, "out.bin")
}

func TestRemoveTemps(t *testing.T) {
	dir := t.TempDir()
	f, err := Create(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("x"))
	d, err := CreateDir(filepath.Join(dir, "bundle"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(d.Path, "inner"), []byte("y"), 0o644)
	RemoveTemps()
	assertOnly(t, dir)
}

func TestDirReplacesOld(t *testing.T) {
	dir := t.TempDir()
	final := filepath.Join(dir, "bundle")
	os.Mkdir(final, 0o755)
	os.WriteFile(filepath.Join(final, "old"), nil, 0o644)
	d, err := CreateDir(final)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(d.Path, "new"), nil, 0o644)
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	assertOnly(t, final, "new")
	assertOnly(t, dir, "bundle")
}

func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if len(got) != len(names) {
		t.Fatalf("%s holds %v, want %v", dir, got, names)
	}
	for i := range got {
		if got[i] != names[i] {
			t.Fatalf("%s holds %v, want %v", dir, got, names)
		}
	}
}
