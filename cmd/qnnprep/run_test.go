package main

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/runtime"
)

// captureStdout runs f with os.Stdout redirected and returns what it wrote.
func captureStdout(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	f()
	os.Stdout = old
	w.Close()
	return <-done
}

func TestRunCommand(t *testing.T) {
	if _, err := os.Stat(storiesGGUF); err != nil {
		t.Fatalf("fixture missing: %v", err)
	}
	dir := filepath.Dir(storiesGGUF)
	wantText, err := os.ReadFile(filepath.Join(dir, "greedy_t0_n64_once_upon_a_time.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var code int
	out := captureStdout(t, func() {
		code = run([]string{"run", storiesGGUF, "--prompt", "Once upon a time", "-n", "60", "-t", "1"})
	})
	if code != 0 || out != string(wantText) {
		t.Fatalf("exit %d, output\n%q\nwant\n%q", code, out, wantText)
	}
	// speculate prints the same text (prompt and continuation).
	out = captureStdout(t, func() {
		captureStderr(t, func() {
			code = run([]string{"speculate", storiesGGUF, "--draft", storiesGGUF, "-k", "2", "--prompt", "Once upon a time", "-n", "60", "-t", "1"})
		})
	})
	if code != 0 || out != string(wantText) {
		t.Fatalf("speculate: exit %d, output\n%q\nwant\n%q", code, out, wantText)
	}

	// --ids on the HF form, --json and --logits: the ids are the fixture's,
	// and each logits row's argmax is the token generated from it.
	idsText, err := os.ReadFile(filepath.Join(dir, "greedy_ids_from_bos_first64.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Fields(string(idsText))[:20]
	logits := filepath.Join(t.TempDir(), "logits.bin")
	out = runOK(t, "run", filepath.Join(dir, "hf"), "--ids", "1", "-n", "20", "--json", "--logits", logits)
	var res runtime.RunResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v in %q", err, out)
	}
	if len(res.Generated) != 20 {
		t.Fatalf("%d ids, want 20", len(res.Generated))
	}
	for i, id := range res.Generated {
		if strconv.Itoa(int(id)) != want[i] {
			t.Fatalf("id %d: %d, want %s", i, id, want[i])
		}
	}
	raw, err := os.ReadFile(logits)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 20*512*4 {
		t.Fatalf("logits file has %d bytes, want %d", len(raw), 20*512*4)
	}
	for i := 0; i < 20; i++ {
		best := 0
		row := func(j int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(raw[(i*512+j)*4:])) }
		for j := 1; j < 512; j++ {
			if row(j) > row(best) {
				best = j
			}
		}
		if int32(best) != res.Generated[i] {
			t.Fatalf("logits row %d: argmax %d, generated %d", i, best, res.Generated[i])
		}
	}

	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"run", storiesGGUF, "--ids", "1,x"}, 2},
		{[]string{"run", storiesGGUF}, 2},
		{[]string{"run", storiesGGUF, "--ids", "1", "--prompt", "a"}, 2},
		{[]string{"run", storiesGGUF, "--ids", "1,600"}, 1},             // not in the vocabulary
		{[]string{"run", storiesGGUF, "--ids", "1", "-n", "300"}, 1},    // past the GGUF's context (128)
		{[]string{"run", filepath.Join(dir, "hf"), "--prompt", "a"}, 1}, // no tokenizer.json
	} {
		var code int
		captureStdout(t, func() { code = run(c.args) })
		if code != c.code {
			t.Errorf("%v: exit %d, want %d", c.args, code, c.code)
		}
	}
}
