//go:build unix

package outpath

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
)

func TestCheck(t *testing.T) {
	root := t.TempDir()
	t.Chdir(root)
	write := func(name, data string) {
		t.Helper()
		must(t, os.MkdirAll(filepath.Dir(name), 0o755))
		must(t, os.WriteFile(name, []byte(data), 0o644))
	}
	write("a/x.gguf", "model")
	write("hf/config.json", "{}")
	write("hf/model.safetensors", "weights")
	write("other.gguf", "someone else's")
	must(t, atomicfile.WriteFile("mine.gguf", []byte("an earlier output")))
	write("userdir/notes.txt", "mine")
	write("graphs/g.onnx", "graph")
	must(t, os.Symlink("a/x.gguf", "link.gguf"))
	must(t, os.Symlink("a", "alink"))
	must(t, os.Symlink("nowhere", "dangling"))
	must(t, os.Link("a/x.gguf", "hard.gguf"))
	must(t, os.Link("hf/config.json", "hardcfg.json"))
	must(t, syscall.Mkfifo("fifo", 0o644))
	must(t, os.Mkdir("adir", 0o755))
	must(t, atomicfile.Claim("owned", "bundle.bin"))
	write("owned/bundle.bin", "old output")

	cases := []struct {
		name string
		p    Paths
		want []string // substrings of the error; nil: allowed
	}{
		{"new file", Paths{Inputs: []string{"a/x.gguf"}, Files: []string{"out.gguf"}}, nil},
		{"a file qnnprep did not write", Paths{Inputs: []string{"a/x.gguf"}, Files: []string{"other.gguf"}}, []string{"other.gguf exists and qnnprep did not write it", "not listed in " + atomicfile.MarkerName, "remove it or choose another output name"}},
		{"a file qnnprep wrote", Paths{Inputs: []string{"a/x.gguf"}, Files: []string{"mine.gguf"}}, nil},
		{"a file in a directory qnnprep owns", Paths{Inputs: []string{"a/x.gguf"}, Files: []string{"owned/bundle.bin"}}, nil},
		{"a file in the user's directory", Paths{Files: []string{"userdir/notes.txt"}}, []string{"userdir/notes.txt", "did not write it", filepath.Join("userdir", atomicfile.MarkerName)}},
		{"a symlink qnnprep did not make", Paths{Files: []string{"dangling"}}, []string{"dangling", "did not write it"}},
		{"output is the input", Paths{Inputs: []string{"a/x.gguf"}, Files: []string{"a/x.gguf"}}, []string{"output a/x.gguf is the input a/x.gguf"}},
		{"through ..", Paths{Inputs: []string{"a/x.gguf"}, Files: []string{"./a/../a/x.gguf"}}, []string{"./a/../a/x.gguf", "the input a/x.gguf"}},
		{"through a symlinked file", Paths{Inputs: []string{"a/x.gguf"}, Files: []string{"link.gguf"}}, []string{"link.gguf", "a/x.gguf"}},
		{"through a symlinked directory", Paths{Inputs: []string{"link.gguf"}, Files: []string{"alink/x.gguf"}}, []string{"alink/x.gguf", "link.gguf"}},
		{"hard link", Paths{Inputs: []string{"a/x.gguf"}, Files: []string{"hard.gguf"}}, []string{"hard.gguf", "a/x.gguf"}},
		{"inside the input directory", Paths{Inputs: []string{"hf"}, Files: []string{"hf/config.json"}}, []string{"hf/config.json", "input directory hf"}},
		{"new file inside the input directory", Paths{Inputs: []string{"hf"}, Files: []string{"hf/new.gguf"}}, []string{"hf/new.gguf", "hf"}},
		{"hard link into the input directory", Paths{Inputs: []string{"hf"}, Files: []string{"hardcfg.json"}}, []string{"hardcfg.json", "hf"}},
		{"second output is the input", Paths{Inputs: []string{"a/x.gguf"}, Files: []string{"out.gguf", "a/x.gguf"}}, []string{"a/x.gguf"}},
		{"two outputs the same", Paths{Files: []string{"out.gguf", "./out.gguf"}}, []string{"out.gguf", "same output"}},
		{"a fifo", Paths{Files: []string{"fifo"}}, []string{"fifo", "not a regular file"}},
		{"a directory", Paths{Files: []string{"adir"}}, []string{"adir", "a directory"}},
		{"missing parent", Paths{Files: []string{"nodir/out.gguf"}}, []string{"nodir/out.gguf", "does not exist"}},
		{"parent is a file", Paths{Files: []string{"other.gguf/out.gguf"}}, []string{"other.gguf/out.gguf", "not a directory"}},

		{"new directory", Paths{Inputs: []string{"graphs"}, Dirs: []string{"new/deep/bundle"}}, nil},
		{"own directory again", Paths{Inputs: []string{"graphs"}, Dirs: []string{"owned"}}, nil},
		{"empty directory", Paths{Dirs: []string{"adir"}}, nil},
		{"directory with the user's files", Paths{Dirs: []string{"userdir"}}, []string{"userdir", "notes.txt", "did not write"}},
		{"out equal to an input directory", Paths{Inputs: []string{"graphs"}, Dirs: []string{"./graphs/"}}, []string{"graphs"}},
		{"directory inside an input directory", Paths{Inputs: []string{"graphs"}, Dirs: []string{"graphs/bundle"}}, []string{"graphs/bundle", "input directory graphs"}},
		{"input inside the directory", Paths{Inputs: []string{"owned/bundle.bin"}, Dirs: []string{"owned"}}, []string{"owned/bundle.bin", "inside the output directory owned"}},
		{"directory over a file", Paths{Dirs: []string{"other.gguf"}}, []string{"other.gguf", "not a directory"}},
		{"file and directory the same", Paths{Files: []string{"owned"}, Dirs: []string{"owned"}}, []string{"owned"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Check(c.p)
			if c.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("allowed")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	// Nothing was touched, and the probes left no file behind.
	for name, want := range map[string]string{"other.gguf": "someone else's", "a/x.gguf": "model", "hf/config.json": "{}", "userdir/notes.txt": "mine", "graphs/g.onnx": "graph"} {
		if b, err := os.ReadFile(name); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", name, b, err, want)
		}
	}
	ents, _ := os.ReadDir(".")
	for _, e := range ents {
		if strings.Contains(e.Name(), "probe") {
			t.Errorf("probe file %s left behind", e.Name())
		}
	}
}

func TestCheckReadOnlyDir(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes into read-only directories; nothing to refuse")
	}
	dir := filepath.Join(t.TempDir(), "ro")
	must(t, os.Mkdir(dir, 0o555))
	for _, p := range []Paths{{Files: []string{filepath.Join(dir, "out.gguf")}}, {Dirs: []string{filepath.Join(dir, "bundle")}}} {
		if err := Check(p); err == nil || !strings.Contains(err.Error(), "not writable") {
			t.Errorf("%+v: %v, want \"not writable\"", p, err)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestSameFile(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	must(t, os.WriteFile(a, []byte("x"), 0o644))
	must(t, os.WriteFile(b, []byte("x"), 0o644))
	must(t, os.Symlink(a, filepath.Join(dir, "link")))
	for _, c := range []struct {
		x, y string
		want bool
	}{
		{a, a, true},
		{a, filepath.Join(dir, "..", filepath.Base(dir), "a"), true},
		{a, filepath.Join(dir, "link"), true},
		{a, b, false}, // same bytes, another file
		{a, filepath.Join(dir, "missing"), false},
		{a, "", false},
	} {
		if got := SameFile(c.x, c.y); got != c.want {
			t.Errorf("SameFile(%q, %q) = %v, want %v", c.x, c.y, got, c.want)
		}
	}
}
