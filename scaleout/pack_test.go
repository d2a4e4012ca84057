package scaleout

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/testkit"
)

// testBundle builds a bundle with the fake SDK into a new directory.
func testBundle(t testing.TB) string {
	t.Helper()
	e := newEnv(t)
	out := filepath.Join(t.TempDir(), "bundle")
	_, err := qnnpack.Build(context.Background(), e.options(out, out+".work"))
	require.NoError(t, err)
	return out
}

// copyTree copies dir's files to a new directory with other modes and
// times, which must not change the archive.
func copyTree(t *testing.T, dir string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy")
	for name, b := range testkit.ReadTree(t, dir) {
		p := filepath.Join(dst, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte(b), 0o600))
		require.NoError(t, os.Chtimes(p, time.Now(), time.Unix(1234567890, 0)))
	}
	return dst
}

func TestPackIsDeterministicAndUnpacks(t *testing.T) {
	ctx := context.Background()
	dir := testBundle(t)
	var a, b bytes.Buffer
	st, err := Pack(ctx, dir, &a)
	require.NoError(t, err)
	_, err = Pack(ctx, copyTree(t, dir), &b)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(a.Bytes(), b.Bytes()), "two packs of the same bundle differ")
	m, err := qnnpack.VerifyBundle(dir)
	require.NoError(t, err)
	assert.Equal(t, len(m.Files)+1, st.Files)

	// Sorted entries, fixed owner, mode and time.
	zr, err := zstd.NewReader(bytes.NewReader(a.Bytes()))
	require.NoError(t, err)
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		names = append(names, h.Name)
		assert.Equal(t, 0, h.Uid)
		assert.Equal(t, int64(0o644), h.Mode)
		assert.True(t, h.ModTime.Equal(packTime), h.Name)
	}
	assert.True(t, sort.StringsAreSorted(names), "%v", names)

	out := filepath.Join(t.TempDir(), "unpacked")
	_, err = Unpack(ctx, bytes.NewReader(a.Bytes()), out)
	require.NoError(t, err)
	assert.Equal(t, testkit.ReadTree(t, dir), testkit.ReadTree(t, out))
}

func TestPackRefusesChangedBundle(t *testing.T) {
	dir := copyTree(t, testBundle(t))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "extra.txt"), []byte("x"), 0o644))
	_, err := Pack(context.Background(), dir, io.Discard)
	assert.ErrorContains(t, err, "extra.txt is not in manifest.json")
	require.NoError(t, os.Remove(filepath.Join(dir, "extra.txt")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, qnnpack.TokenizerName), []byte(`{"model":{"type":"BPX"}}`), 0o644))
	_, err = Pack(context.Background(), dir, io.Discard)
	assert.ErrorContains(t, err, "changed since the manifest was written")
}

// A bundle that unpack would refuse is not packed: a dry run, or one its
// build marked incomplete.
func TestPackRefusesUnfinishedBundle(t *testing.T) {
	dir := testBundle(t)
	require.NoError(t, qnnpack.MarkIncomplete(dir, "build interrupted"))
	_, err := Pack(context.Background(), dir, io.Discard)
	assert.ErrorContains(t, err, "is marked incomplete: build interrupted")

	e := newEnv(t)
	dry := filepath.Join(t.TempDir(), "bundle")
	o := e.options(dry, dry+".work")
	o.DryRun = true
	_, err = qnnpack.Build(context.Background(), o)
	require.NoError(t, err)
	_, err = Pack(context.Background(), dry, io.Discard)
	assert.ErrorContains(t, err, "is a dry-run bundle")
}

type entry struct {
	hdr  tar.Header
	body string
}

// archive packs entries as a tar.zst.
func archive(t testing.TB, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf)
	require.NoError(t, err)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := e.hdr
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		require.NoError(t, tw.WriteHeader(&h))
		_, err := io.WriteString(tw, e.body)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// bundleEntries are the entries of a real bundle, to which the cases add
// one bad entry.
func bundleEntries(t *testing.T, dir string) []entry {
	var es []entry
	tree := testkit.ReadTree(t, dir)
	names := make([]string, 0, len(tree))
	for n := range tree {
		if n != atomicfile.MarkerName {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		es = append(es, entry{tar.Header{Typeflag: tar.TypeReg, Name: n}, tree[n]})
	}
	return es
}

func TestUnpackRefuses(t *testing.T) {
	good := bundleEntries(t, testBundle(t))
	reg := func(name, body string) entry { return entry{tar.Header{Typeflag: tar.TypeReg, Name: name}, body} }
	for _, tc := range []struct {
		name  string
		extra entry
		want  string
	}{
		{"parent", reg("../escape.txt", "x"), `bad bundle path "../escape.txt"`},
		{"deep parent", reg("draft/../../escape.txt", "x"), "bad bundle path"},
		{"absolute", reg("/tmp/escape.txt", "x"), "bad bundle path"},
		{"symlink", entry{tar.Header{Typeflag: tar.TypeSymlink, Name: "link", Linkname: "/etc/passwd"}, ""}, "is a symlink"},
		{"hard link", entry{tar.Header{Typeflag: tar.TypeLink, Name: "link", Linkname: "manifest.json"}, ""}, "is a hard link"},
		{"char device", entry{tar.Header{Typeflag: tar.TypeChar, Name: "null", Devmajor: 1, Devminor: 3}, ""}, "character device"},
		{"fifo", entry{tar.Header{Typeflag: tar.TypeFifo, Name: "pipe"}, ""}, "fifo"},
		{"duplicate", reg(qnnpack.TokenizerName, "{}"), "appears twice"},
		{"marker", reg(atomicfile.MarkerName, "x"), "reserved"},
		{"not in manifest", reg("zzz-extra.bin", "x"), "zzz-extra.bin: not in the manifest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			out := filepath.Join(parent, "out")
			_, err := Unpack(context.Background(), bytes.NewReader(archive(t, append(append([]entry{}, good...), tc.extra))), out)
			assert.ErrorContains(t, err, tc.want)
			ents, _ := os.ReadDir(parent)
			assert.Empty(t, ents, "unpack left something behind")
		})
	}
	t.Run("tampered", func(t *testing.T) {
		es := append([]entry{}, good...)
		for i := range es {
			if es[i].hdr.Name == qnnpack.TokenizerName {
				es[i].body = `{"model":{"type":"BPX"}}`
			}
		}
		_, err := Unpack(context.Background(), bytes.NewReader(archive(t, es)), filepath.Join(t.TempDir(), "out"))
		assert.ErrorContains(t, err, "tokenizer.json: SHA-256")
	})
	t.Run("user directory", func(t *testing.T) {
		out := t.TempDir()
		mine := filepath.Join(out, "notes.txt")
		require.NoError(t, os.WriteFile(mine, []byte("keep"), 0o644))
		_, err := Unpack(context.Background(), bytes.NewReader(archive(t, good)), out)
		assert.ErrorIs(t, err, atomicfile.ErrNotOwned)
		b, _ := os.ReadFile(mine)
		assert.Equal(t, "keep", string(b))
	})
}

// FuzzUnpack feeds tar streams (compressed here, so the fuzzer works on
// the tar structure) and raw bytes to Unpack: it must fail or succeed
// without panicking, and never leave anything but its target behind.
func FuzzUnpack(f *testing.F) {
	f.Add(archive(f, []entry{{tar.Header{Typeflag: tar.TypeReg, Name: "manifest.json"}, "{}"}}), false)
	f.Add(archive(f, []entry{{tar.Header{Typeflag: tar.TypeSymlink, Name: "a", Linkname: "../b"}, ""}}), false)
	f.Add(archive(f, []entry{{tar.Header{Typeflag: tar.TypeDir, Name: "d/"}, ""}, {tar.Header{Typeflag: tar.TypeReg, Name: "d/../../x"}, "x"}}), true)
	f.Fuzz(func(t *testing.T, data []byte, compress bool) {
		in := data
		if compress {
			var buf bytes.Buffer
			zw, _ := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
			zw.Write(data)
			zw.Close()
			in = buf.Bytes()
		}
		parent := t.TempDir()
		out := filepath.Join(parent, "out")
		_, err := Unpack(context.Background(), bytes.NewReader(in), out)
		ents, _ := os.ReadDir(parent)
		if err != nil && len(ents) != 0 {
			t.Fatalf("failed unpack left %d entries: %v", len(ents), err)
		}
		if len(ents) > 1 {
			t.Fatalf("unpack wrote %d entries beside its target", len(ents))
		}
	})
}
