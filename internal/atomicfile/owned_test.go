//go:build unix

package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An existing file at an output path is replaced only when qnnprep wrote
// it; the user's file, or a symlink the user made, is refused before the
// work (CheckFile) and again at Commit, and is left as it was.
func TestOwnedFiles(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string) // makes dir/out
		ok    bool                           // CheckFile and WriteFile succeed
		keep  []string                       // dir's entries after a refusal
	}{
		{"new", func(t *testing.T, dir string) {}, true, nil},
		{"the user's file", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "out"), []byte("precious"), 0o644))
		}, false, []string{"out"}},
		{"the user's file beside qnnprep's", func(t *testing.T, dir string) {
			require.NoError(t, WriteFile(filepath.Join(dir, "other"), []byte("x")))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "out"), []byte("precious"), 0o644))
		}, false, []string{MarkerName, "other", "out"}},
		{"qnnprep's file", func(t *testing.T, dir string) {
			require.NoError(t, WriteFile(filepath.Join(dir, "out"), []byte("old")))
		}, true, nil},
		{"listed by an interrupted run", func(t *testing.T, dir string) {
			require.NoError(t, record(dir, "out"))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "out"), []byte("half"), 0o644))
		}, true, nil},
		{"the user's symlink to a file", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "target"), []byte("precious"), 0o644))
			require.NoError(t, os.Symlink("target", filepath.Join(dir, "out")))
		}, false, []string{"out", "target"}},
		{"the user's dangling symlink", func(t *testing.T, dir string) {
			require.NoError(t, os.Symlink("nowhere", filepath.Join(dir, "out")))
		}, false, []string{"out"}},
		{"a listed symlink to a file", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "target"), []byte("precious"), 0o644))
			require.NoError(t, os.Symlink("target", filepath.Join(dir, "out")))
			require.NoError(t, record(dir, "out"))
		}, true, nil},
		{"a listed dangling symlink", func(t *testing.T, dir string) {
			require.NoError(t, os.Symlink("nowhere", filepath.Join(dir, "out")))
			require.NoError(t, record(dir, "out"))
		}, true, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			c.setup(t, dir)
			before := snapshot(t, dir)
			cerr, werr := CheckFile(out), WriteFile(out, []byte("new"))
			if !c.ok {
				for _, err := range []error{cerr, werr} {
					require.ErrorIs(t, err, ErrNotWritten)
					assert.Contains(t, err.Error(), out+" exists and qnnprep did not write it (it is not listed in "+filepath.Join(dir, MarkerName)+"); remove it or choose another output name")
				}
				assert.Equal(t, before, snapshot(t, dir), "a refused output changed the directory")
				assertOnly(t, dir, c.keep...)
				return
			}
			require.NoError(t, cerr)
			require.NoError(t, werr)
			b, err := os.ReadFile(out)
			require.NoError(t, err)
			assert.Equal(t, "new", string(b))
			fi, err := os.Lstat(out)
			require.NoError(t, err)
			assert.True(t, fi.Mode().IsRegular(), "a listed symlink is replaced by the file, not written through")
			if tb, err := os.ReadFile(filepath.Join(dir, "target")); err == nil {
				assert.Equal(t, "precious", string(tb), "the symlink's target changed")
			}
			names, err := readMarker(dir)
			require.NoError(t, err)
			assert.True(t, names["out"], "the marker does not list the committed file")
			// A rerun replaces what the first run wrote.
			require.NoError(t, CheckFile(out))
			require.NoError(t, WriteFile(out, []byte("again")))
			b, _ = os.ReadFile(out)
			assert.Equal(t, "again", string(b))
		})
	}
}

// snapshot maps dir's entries to their bytes (a symlink to "-> target").
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	m := map[string]string{}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if l, err := os.Readlink(p); err == nil {
			m[e.Name()] = "-> " + l
			continue
		}
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		m[e.Name()] = string(b)
	}
	return m
}

// The marker keeps its format: the header, then the names sorted, one a
// line, with what Claim recorded before.
func TestMarkerRecordsFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, Claim(dir, "onnx"))
	require.NoError(t, WriteFile(filepath.Join(dir, "b.gguf"), []byte("b")))
	require.NoError(t, WriteFile(filepath.Join(dir, "a.json"), []byte("a")))
	require.NoError(t, WriteFile(filepath.Join(dir, "b.gguf"), []byte("b2")))
	b, err := os.ReadFile(filepath.Join(dir, MarkerName))
	require.NoError(t, err)
	assert.Equal(t, markerHeader+"a.json\nb.gguf\nonnx\n", string(b))
	assertOnly(t, dir, MarkerName, "a.json", "b.gguf")
	// Only qnnprep's files are here: the directory may be replaced whole.
	require.NoError(t, CheckOwned(dir))

	// Many files committed at once into one directory are all listed.
	par := t.TempDir()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, WriteFile(filepath.Join(par, fmt.Sprintf("f%02d", i)), []byte{byte(i)}))
		}()
	}
	wg.Wait()
	names, err := readMarker(par)
	require.NoError(t, err)
	assert.Len(t, names, 16)
	require.NoError(t, CheckOwned(par))
}

// A directory whose marker lists qnnprep's files but which also holds the
// user's is still the user's as an output directory.
func TestMarkerWithUsersFilesIsNotOwned(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644))
	require.NoError(t, WriteFile(filepath.Join(dir, "out.gguf"), []byte("x")))
	err := CheckOwned(dir)
	require.ErrorIs(t, err, ErrNotOwned)
	assert.Contains(t, err.Error(), "notes.txt")
	_, err = CreateDir(dir)
	require.ErrorIs(t, err, ErrNotOwned)
	require.ErrorIs(t, Claim(dir, "x.onnx"), ErrNotOwned)
	assertOnly(t, dir, MarkerName, "notes.txt", "out.gguf")
}

// Files written inside a temporary output directory, or under an entry a
// marker lists, are covered by that directory: no marker of their own, and
// what is there (a tool's output) may be replaced.
func TestCoveredFilesAreNotRecorded(t *testing.T) {
	root := t.TempDir()
	d, err := CreateDir(filepath.Join(root, "bundle"))
	require.NoError(t, err)
	require.NoError(t, os.Mkdir(filepath.Join(d.Path, "sub"), 0o755))
	for _, p := range []string{"manifest.json", "sub/lut.bin", "manifest.json"} {
		require.NoError(t, WriteFile(filepath.Join(d.Path, p), []byte(p)))
	}
	assertOnly(t, filepath.Join(d.Path, "sub"), "lut.bin")
	assertOnly(t, d.Path, "manifest.json", "sub")
	require.NoError(t, d.Commit())
	b, err := os.ReadFile(filepath.Join(root, "bundle", MarkerName))
	require.NoError(t, err)
	assert.Equal(t, markerHeader+"manifest.json\nsub\n", string(b))
	// Into the committed bundle: listed, replaced, nothing recorded below.
	require.NoError(t, WriteFile(filepath.Join(root, "bundle", "manifest.json"), []byte("v2")))
	require.NoError(t, WriteFile(filepath.Join(root, "bundle", "sub", "lut.bin"), []byte("v2")))
	assertOnly(t, filepath.Join(root, "bundle", "sub"), "lut.bin")

	work := filepath.Join(root, "work")
	require.NoError(t, Claim(work, "stage1"))
	stage := filepath.Join(work, "stage1", "bin")
	require.NoError(t, os.MkdirAll(stage, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(stage, "ctx.bin"), []byte("from the SDK"), 0o644))
	require.NoError(t, CheckFile(filepath.Join(stage, "ctx.bin")))
	require.NoError(t, WriteFile(filepath.Join(stage, "ctx.bin"), []byte("from the cache")))
	assertOnly(t, stage, "ctx.bin")
	assertOnly(t, root, "bundle", "work")
}

// A name a marker line cannot hold is refused before any work.
func TestUnrecordableName(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"#out", "a\nb"} {
		require.Error(t, CheckFile(filepath.Join(dir, n)), "%q", n)
		require.Error(t, WriteFile(filepath.Join(dir, n), nil), "%q", n)
	}
	assertOnly(t, dir)
}

// A file the user puts at the output path while qnnprep works is refused
// at Commit and kept; nothing is recorded for it.
func TestCommitRefusesAFileThatAppeared(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	f, err := Create(out)
	require.NoError(t, err)
	defer f.Abort()
	_, err = f.Write([]byte("hours of work"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(out, []byte("precious"), 0o644))
	require.ErrorIs(t, f.Commit(), ErrNotWritten)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, "precious", string(b))
	assertOnly(t, dir, "out")
}

// Remove takes a scratch output and its marker entry away (the marker too
// when it lists nothing more); the user's file it refuses.
func TestRemove(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	require.NoError(t, WriteFile(a, []byte("a")))
	require.NoError(t, WriteFile(b, []byte("b")))
	require.NoError(t, Remove(a))
	assertOnly(t, dir, MarkerName, "b")
	require.NoError(t, Remove(b))
	require.NoError(t, Remove(b), "removing what is gone")
	assertOnly(t, dir)

	user := filepath.Join(dir, "user")
	require.NoError(t, os.WriteFile(user, []byte("mine"), 0o644))
	require.ErrorIs(t, Remove(user), ErrNotWritten)
	assertOnly(t, dir, "user")
}

// An interrupt (RemoveTemps) while a commit syncs leaves neither the
// output nor a marker.
func TestCommitAfterRemoveTemps(t *testing.T) {
	dir := t.TempDir()
	f, err := Create(filepath.Join(dir, "out"))
	require.NoError(t, err)
	RemoveTemps()
	require.Error(t, f.Commit())
	assertOnly(t, dir)
}
