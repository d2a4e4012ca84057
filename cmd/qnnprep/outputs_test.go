package main

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/synth"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNeverDestroysInputs runs every data-loss case of issue #19: each
// command must fail before any work, name both paths, and leave every file
// in the tree byte-identical (nothing replaced, nothing added).
func TestNeverDestroysInputs(t *testing.T) {
	if goruntime.GOOS == "windows" {
		t.Skip("symbolic links, fifos and device nodes as the cases make them are Unix's")
	}
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("QNN_SDK_ROOT", "")
	t.Setenv("QAIRT_SDK_ROOT", "")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir("a", 0o755))
	must(synth.WriteGGUF("a/X.gguf", synth.Config(model.Llama, true), 3, gguf.F32))
	must(synth.WriteHF("hf", synth.Config(model.Llama, true), 3, 1))
	must(os.WriteFile("p.txt", []byte("ids: 1 2 3\n"), 0o644))
	must(os.Symlink("a/X.gguf", "link.gguf"))
	must(os.Link("a/X.gguf", "hard.gguf"))
	must(mkfifo("fifo"))
	if code := run([]string{"plan", "a/X.gguf", "--stages", "2", "-o", "plan.json"}); code != 0 {
		t.Fatalf("plan: exit %d", code)
	}
	plan, err := os.ReadFile("plan.json")
	must(err)
	first := `"` + strings.Split(strings.Split(string(plan), `"graphs": ["`)[1], `"`)[0] + `"`
	must(os.WriteFile("evil.json", []byte(strings.ReplaceAll(string(plan), first, `"../../evil"`)), 0o644))
	must(os.Mkdir("graphs", 0o755))
	must(os.WriteFile("graphs/g.onnx", []byte("exported graph"), 0o644))
	must(os.Mkdir("userdir", 0o755))
	must(os.WriteFile("userdir/notes.txt", []byte("the user's"), 0o644))
	must(atomicfile.Claim("built", "work", "bundle", "summary.json"))
	must(os.MkdirAll("built/bundle", 0o755))
	must(os.WriteFile("built/bundle/notes.txt", []byte("the user's"), 0o644))
	must(os.Mkdir("adir", 0o755))

	bundle := func(out string, extra ...string) []string {
		return append([]string{"bundle", "build", "--plan", "plan.json", "--model", "a/X.gguf", "--graphs", "graphs", "--out", out, "--soc", "8gen3", "--dry-run"}, extra...)
	}
	cases := []struct {
		args []string
		want []string // each must appear in the error
	}{
		{[]string{"quantize", "a/X.gguf", "a/X.gguf", "--recipe", "q8_0"}, []string{"output a/X.gguf", "input a/X.gguf"}},
		{[]string{"convert", "--to", "gguf", "hf", "hf/model.safetensors"}, []string{"hf/model.safetensors", "input directory hf"}},
		{[]string{"quantize", "hf", "hf/config.json", "--recipe", "q8_0"}, []string{"hf/config.json", "input directory hf"}},
		{[]string{"quantize", "hf/config.json", "hf/model.safetensors", "--recipe", "q8_0"}, []string{"hf/model.safetensors", "hf"}},
		{[]string{"plan", "a/X.gguf", "-o", "a/X.gguf"}, []string{"output a/X.gguf", "input a/X.gguf"}},
		{[]string{"golden", "record", "a/X.gguf", "--prompts", "p.txt", "a/X.gguf"}, []string{"output a/X.gguf", "input a/X.gguf"}},
		{[]string{"golden", "record", "a/X.gguf", "--prompts", "p.txt", "p.txt"}, []string{"output p.txt", "input p.txt"}},
		{[]string{"run", "a/X.gguf", "--ids", "1", "-n", "2", "--logits", "a/X.gguf"}, []string{"output a/X.gguf", "input a/X.gguf"}},
		{[]string{"quantize", "a/X.gguf", "o.gguf", "--report", "a/X.gguf", "--recipe", "q8_0"}, []string{"output a/X.gguf", "input a/X.gguf"}},
		{[]string{"quantize", "a/X.gguf", "o.gguf", "--report", "o.gguf", "--recipe", "q8_0"}, []string{"o.gguf", "same output"}},
		{[]string{"quantize", "a/X.gguf", "./a/../a/X.gguf", "--recipe", "q8_0"}, []string{"output ./a/../a/X.gguf", "input a/X.gguf"}},
		{[]string{"quantize", "a/X.gguf", "link.gguf", "--recipe", "q8_0"}, []string{"output link.gguf", "input a/X.gguf"}},
		{[]string{"quantize", "link.gguf", "a/X.gguf", "--recipe", "q8_0"}, []string{"output a/X.gguf", "input link.gguf"}},
		{[]string{"quantize", "a/X.gguf", "hard.gguf", "--recipe", "q8_0"}, []string{"output hard.gguf", "input a/X.gguf"}},
		{[]string{"plan", "link.gguf", "-o", "./a/../hard.gguf"}, []string{"output ./a/../hard.gguf", "input link.gguf"}},
		{[]string{"verify", "a/X.gguf", "--golden", "p.txt", "--report", "p.txt"}, []string{"output p.txt", "input p.txt"}},
		{bundle("userdir"), []string{"userdir", "userdir/notes.txt", "did not write"}},
		{bundle("graphs"), []string{"output directory graphs", "input graphs"}},
		{bundle("graphs/bundle"), []string{"graphs/bundle", "input directory graphs"}},
		{bundle("b", "--work", "graphs"), []string{"output directory graphs", "input graphs"}},
		{[]string{"build", "a/X.gguf", "userdir", "--recipe", "q8_0", "--dry-run"}, []string{"userdir", "userdir/notes.txt"}},
		{[]string{"build", "a/X.gguf", "built", "--recipe", "q8_0", "--dry-run"}, []string{"built/bundle", "built/bundle/notes.txt"}},
		{[]string{"build", "hf", "hf/out", "--recipe", "q8_0", "--dry-run"}, []string{"hf/out", "input directory hf"}},
		{[]string{"demo", "--keep", "userdir"}, []string{"userdir", "userdir/notes.txt"}},
		{[]string{"demo", "--model", "hf", "--keep", "hf/demo"}, []string{"hf/demo", "input directory hf"}},
		{[]string{"export", "onnx", "plan.json", "a/X.gguf", "userdir"}, []string{"userdir", "userdir/notes.txt"}},
		{[]string{"export", "onnx", "plan.json", "a/X.gguf", "a"}, []string{"output directory a", "a/X.gguf"}},
		{[]string{"check", "evil.json"}, []string{"evil.json", `"../../evil"`}},
		{[]string{"export", "onnx", "evil.json", "a/X.gguf", "e"}, []string{"evil.json", `"../../evil"`}},
		{[]string{"bundle", "build", "--plan", "evil.json", "--model", "a/X.gguf", "--graphs", "graphs", "--out", "e", "--soc", "8gen3", "--dry-run"}, []string{"evil.json", `"../../evil"`}},
		{[]string{"run", "a/X.gguf", "--plan", "evil.json", "--ids", "1", "-n", "2"}, []string{"evil.json", `"../../evil"`}},
		{[]string{"quantize", "a/X.gguf", "fifo", "--recipe", "q8_0"}, []string{"fifo", "not a regular file"}},
		{[]string{"quantize", "a/X.gguf", "adir", "--recipe", "q8_0"}, []string{"adir", "a directory"}},
		{[]string{"quantize", "a/X.gguf", "nodir/o.gguf", "--recipe", "q8_0"}, []string{"nodir/o.gguf", "nodir", "does not exist"}},
		{[]string{"plan", "a/X.gguf", "-o", "a/X.gguf/plan.json"}, []string{"a/X.gguf/plan.json", "not a directory"}},
	}
	if os.Geteuid() == 0 {
		// The /dev/null of the issue, made here: a character device 1:3.
		must(mknodNull("null"))
		cases = append(cases,
			struct {
				args []string
				want []string
			}{[]string{"quantize", "a/X.gguf", "null", "--recipe", "q8_0"}, []string{"null", "character device"}},
			struct {
				args []string
				want []string
			}{[]string{"plan", "a/X.gguf", "-o", "null"}, []string{"null", "character device"}},
		)
	} else {
		t.Log("device-node cases skipped: mknod needs root (the fifo cases cover non-regular files)")
	}

	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			before := snapshot(t, dir)
			var code int
			stderr := captureStderr(t, func() { code = run(c.args) })
			if code == 0 {
				t.Fatalf("exit 0, want an error\n%s", stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("error does not say %q:\n%s", w, stderr)
				}
			}
			if after := snapshot(t, dir); after != before {
				t.Errorf("the tree changed:\n%s\nwas:\n%s", after, before)
			}
		})
	}
}

// snapshot lists every path under root with its type and, for regular
// files, contents (by length and SHA-256).
func snapshot(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v", p, fi.Mode())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %d %x", len(data), sha256.Sum256(data))
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			l, _ := os.Readlink(p)
			fmt.Fprintf(&b, " -> %s", l)
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestRerunIntoOwnOutput: what a command wrote it may write again.
func TestRerunIntoOwnOutput(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("QNN_SDK_ROOT", "")
	t.Setenv("QAIRT_SDK_ROOT", "")
	if err := synth.WriteGGUF("X.gguf", synth.Config(model.Llama, true), 3, gguf.F32); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"plan", "X.gguf", "--stages", "2", "--ar", "16,1", "--cl", "64", "-o", "plan.json"}); code != 0 {
		t.Fatalf("plan: exit %d", code)
	}
	steps := [][]string{
		{"export", "onnx", "plan.json", "X.gguf", "graphs", "-q"},
		{"bundle", "build", "--plan", "plan.json", "--model", "X.gguf", "--graphs", "graphs", "--out", "bundle", "--soc", "8gen3", "--dry-run"},
		{"build", "X.gguf", "out", "--recipe", "q8_0", "--stages", "2", "--ar", "16,1", "--cl", "64", "--dry-run", "--calibrate", "0", "--no-verify", "-q", "--json"},
	}
	for round := range 2 {
		for _, a := range steps {
			var code int
			stderr := captureStderr(t, func() { captureStdout(t, func() { code = run(a) }) })
			if code != 0 {
				t.Fatalf("round %d: %v: exit %d\n%s", round+1, a, code, stderr)
			}
		}
	}
}

// TestCLAboveContext: a CL above the model's context length is refused by
// the first command that can know it: plan (the model), check (the plan's
// context_length), export and run --plan (the model given with the plan).
func TestCLAboveContext(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	cfg := synth.Config(model.Llama, true) // context length 256
	if err := synth.WriteGGUF("X.gguf", cfg, 3, gguf.F32); err != nil {
		t.Fatal(err)
	}
	long := cfg
	long.ContextLength = 512
	if err := synth.WriteGGUF("long.gguf", long, 3, gguf.F32); err != nil {
		t.Fatal(err)
	}
	var code int
	runOK(t, "plan", "long.gguf", "--stages", "2", "--ar", "16,1", "--cl", "512", "-o", "long.json")
	plan, _ := os.ReadFile("long.json")
	edited := strings.Replace(string(plan), `"context_length": 512`, `"context_length": 256`, 1)
	if edited == string(plan) {
		t.Fatal("context_length not found in the plan")
	}
	os.WriteFile("edited.json", []byte(edited), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "X.gguf", "--cl", "512", "-o", "p.json"}, "CL above the model's context length 256"},
		{[]string{"check", "edited.json"}, "CL above the model's context length 256"},
		{[]string{"export", "onnx", "long.json", "X.gguf", "onnx"}, "CL 512 above the model's context length 256"},
		{[]string{"run", "X.gguf", "--plan", "long.json", "--ids", "1", "-n", "2"}, "CL 512 above the model's context length 256"},
	} {
		stderr := captureStderr(t, func() { captureStdout(t, func() { code = run(c.args) }) })
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, want an error saying %q:\n%s", c.args, code, c.want, stderr)
		}
	}
	for _, p := range []string{"p.json", "onnx"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
}

// TestNeverReplacesUsersFiles: a regular file the user made at a single-file
// output path is refused before any work and left byte-identical; a file
// the command wrote there itself is replaced by the next run.
func TestNeverReplacesUsersFiles(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("QNN_SDK_ROOT", "")
	t.Setenv("QAIRT_SDK_ROOT", "")
	require.NoError(t, synth.WriteGGUF("X.gguf", synth.Config(model.Llama, true), 3, gguf.F32))
	require.NoError(t, os.WriteFile("p.txt", []byte("ids: 1 2 3\n"), 0o644))
	cases := []struct {
		name string
		args func(out string) []string
	}{
		{"quantize", func(out string) []string { return []string{"quantize", "X.gguf", out, "--recipe", "q8_0"} }},
		{"quantize --report", func(out string) []string {
			return []string{"quantize", "X.gguf", out + ".gguf", "--report", out, "--recipe", "q8_0"}
		}},
		{"run --logits", func(out string) []string {
			return []string{"run", "X.gguf", "--ids", "1,2", "-n", "2", "--ignore-eos", "--logits", out}
		}},
		{"golden record", func(out string) []string { return []string{"golden", "record", "X.gguf", "--prompts", "p.txt", out} }},
		{"plan -o", func(out string) []string { return []string{"plan", "X.gguf", "--stages", "2", "-o", out} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			user := "mine-" + strings.ReplaceAll(strings.ReplaceAll(c.name, " ", ""), "-", "")
			require.NoError(t, os.WriteFile(user, []byte("precious\n"), 0o644))
			before := snapshot(t, dir)
			var code int
			stderr := captureStderr(t, func() { captureStdout(t, func() { code = run(c.args(user)) }) })
			require.NotEqual(t, 0, code, "exit 0 over the user's file\n%s", stderr)
			assert.Contains(t, stderr, user+" exists and qnnprep did not write it (it is not listed in "+atomicfile.MarkerName+"); remove it or choose another output name")
			assert.Equal(t, before, snapshot(t, dir), "the tree changed")

			// Its own output, a rerun replaces.
			own := "own-" + user
			for round := range 2 {
				stderr := captureStderr(t, func() { captureStdout(t, func() { code = run(c.args(own)) }) })
				require.Equal(t, 0, code, "round %d\n%s", round+1, stderr)
			}
			b, err := os.ReadFile(atomicfile.MarkerName)
			require.NoError(t, err)
			assert.Contains(t, strings.Split(string(b), "\n"), own, "the marker does not list the output")
			b, err = os.ReadFile(user)
			require.NoError(t, err)
			assert.Equal(t, "precious\n", string(b))
		})
	}
}
