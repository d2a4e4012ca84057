package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/testkit"
)

// inspect shows any valid GGUF, also one the pipeline cannot use:
// llama.cpp's vocabulary-only files of other architectures, with their
// metadata, tensors (none) and notes saying what is not supported.
func TestInspectAnyGGUF(t *testing.T) {
	for _, p := range testkit.Vocabs(t) {
		t.Run(filepath.Base(p), func(t *testing.T) {
			f, err := gguf.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var code int
			out := runOK(t, "inspect", "--json", p)
			var info inspectInfo
			if err := json.Unmarshal([]byte(out), &info); err != nil {
				t.Fatalf("inspect --json: %v\n%s", err, out)
			}
			if info.Config != nil || len(info.Metadata) != len(f.Metadata) || len(info.Tensors) != len(f.Tensors) {
				t.Errorf("config %v, %d keys (file %d), %d tensors (file %d)", info.Config, len(info.Metadata), len(f.Metadata), len(info.Tensors), len(f.Tensors))
			}
			for i, kv := range info.Metadata {
				if kv.Key != f.Metadata[i].Key {
					t.Errorf("key %d: %s, file has %s", i, kv.Key, f.Metadata[i].Key)
				}
			}
			notes := strings.Join(info.Notes, "\n")
			if !strings.Contains(notes, "not a model the pipeline can use: ") || !strings.Contains(notes, "no tensors") {
				t.Errorf("notes %q", notes)
			}
			text := captureStdout(t, func() { code = run([]string{"inspect", p}) })
			if code != 0 || !strings.Contains(text, "tokenizer.ggml.tokens") || !strings.Contains(text, "note: ") {
				t.Errorf("text output (exit %d):\n%s", code, text)
			}
		})
	}
}

// A GGUF of a supported architecture that the pipeline refuses is shown
// too, with the reason; a file that is not valid GGUF is an error.
func TestInspectRefusedModel(t *testing.T) {
	src, err := gguf.Open(fixture(t, "stories260K/stories260K-llamacpp.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	w := &gguf.Writer{Metadata: append(gguf.Metadata(nil), src.Metadata...)}
	w.Metadata.Set("tokenizer.ggml.bos_token_id", uint32(600))
	for i := range src.Tensors {
		ti := &src.Tensors[i]
		b, err := src.Data(ti)
		if err != nil {
			t.Fatal(err)
		}
		w.Tensors = append(w.Tensors, gguf.WriterTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: gguf.Bytes(b)})
	}
	bad := filepath.Join(t.TempDir(), "bad-bos.gguf")
	if err := gguf.WriteFile(bad, w); err != nil {
		t.Fatal(err)
	}
	var code int
	out := captureStdout(t, func() { code = run([]string{"inspect", "--json", bad}) })
	var info inspectInfo
	if err := json.Unmarshal([]byte(out), &info); err != nil || code != 0 {
		t.Fatalf("exit %d, %v", code, err)
	}
	if len(info.Tensors) != len(src.Tensors) || info.Bytes == 0 ||
		!strings.Contains(strings.Join(info.Notes, "\n"), "key tokenizer.ggml.bos_token_id = 600 is outside the vocabulary (ids 0..511)") {
		t.Errorf("%d tensors, %d bytes, notes %q", len(info.Tensors), info.Bytes, info.Notes)
	}
	// Every command that needs the model refuses it, naming the key.
	msg := captureStderr(t, func() {
		code = run([]string{"quantize", bad, filepath.Join(t.TempDir(), "q.gguf"), "--recipe", "q8_0"})
	})
	if code == 0 || !strings.Contains(msg, "tokenizer.ggml.bos_token_id = 600") {
		t.Errorf("quantize: exit %d, %q", code, msg)
	}

	junk := writeText(t, t.TempDir(), "junk.gguf", "GGUF\x03\x00\x00\x00 truncated")
	msg = captureStderr(t, func() { code = run([]string{"inspect", junk}) })
	if code == 0 || !strings.Contains(msg, "junk.gguf") {
		t.Errorf("junk: exit %d, %q", code, msg)
	}
}

// --json gives layer kinds as names, not base64.
func TestInspectLayerKindNames(t *testing.T) {
	var code int
	out := captureStdout(t, func() {
		code = run([]string{"inspect", "--json", fixture(t, "stories260K/stories260K-llamacpp.gguf")})
	})
	var raw struct {
		Config struct {
			LayerKinds []string `json:"layer_kinds"`
		} `json:"config"`
	}
	if err := json.Unmarshal([]byte(out), &raw); err != nil || code != 0 {
		t.Fatalf("exit %d, %v", code, err)
	}
	if strings.Join(raw.Config.LayerKinds, ",") != "attention,attention,attention,attention,attention" {
		t.Errorf("layer kinds %q", raw.Config.LayerKinds)
	}
}
