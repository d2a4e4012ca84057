package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
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
	assertOnly(t, dir, MarkerName, "out.bin")
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
	for _, name := range []string{"old", "new"} {
		d, err := CreateDir(final)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d.Path, name), nil, 0o644)
		if err := d.Commit(); err != nil {
			t.Fatal(err)
		}
		assertOnly(t, final, MarkerName, name)
	}
	assertOnly(t, dir, "bundle")
}

// A directory holding anything its marker does not list is the user's:
// neither CreateDir nor Claim touches it, and a Commit racing a file put
// there in the meantime gives up.
func TestDirKeepsTheUsers(t *testing.T) {
	dir := t.TempDir()
	user := filepath.Join(dir, "user")
	os.Mkdir(user, 0o755)
	os.WriteFile(filepath.Join(user, "notes.txt"), []byte("mine"), 0o644)
	if _, err := CreateDir(user); !errors.Is(err, ErrNotOwned) || !strings.Contains(err.Error(), "notes.txt") {
		t.Fatalf("CreateDir over the user's directory: %v", err)
	}
	if err := Claim(user, "x.onnx"); !errors.Is(err, ErrNotOwned) {
		t.Fatalf("Claim in the user's directory: %v", err)
	}
	assertOnly(t, user, "notes.txt")

	final := filepath.Join(dir, "bundle")
	d, err := CreateDir(final)
	if err != nil {
		t.Fatal(err)
	}
	os.Mkdir(final, 0o755)
	os.WriteFile(filepath.Join(final, "late.txt"), []byte("mine"), 0o644)
	if err := d.Commit(); !errors.Is(err, ErrNotOwned) {
		t.Fatalf("Commit over a directory that became the user's: %v", err)
	}
	assertOnly(t, final, "late.txt")
	assertOnly(t, dir, "bundle", "user")
}

func TestClaim(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "onnx")
	if err := Claim(dir, "b.onnx", "a.onnx"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "a.onnx"), nil, 0o644)
	if err := CheckOwned(dir); err != nil {
		t.Fatal(err)
	}
	if err := Claim(dir, "c.onnx", "a.onnx"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, MarkerName))
	if want := markerHeader + "a.onnx\nb.onnx\nc.onnx\n"; string(b) != want {
		t.Fatalf("marker %q, want %q", b, want)
	}
	os.WriteFile(filepath.Join(dir, "z.txt"), nil, 0o644)
	if err := CheckOwned(dir); !errors.Is(err, ErrNotOwned) || !strings.Contains(err.Error(), "z.txt") {
		t.Fatalf("unlisted file: %v", err)
	}
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
