// Package golden records what a model is expected to generate and checks
// artifacts against it: exact-match length, first divergence, teacher-forced
// top-1 agreement, logit cosine, and degeneration such as a token or a short
// cycle repeating where the golden output does not.
package golden

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
)

// Version is the golden file format version this package writes and reads.
const Version = 1

// File is a golden file: prompts and what the source model produced for
// them, with the settings and the model fingerprint that produced it.
type File struct {
	Version   int      `json:"version"`
	Model     ModelRef `json:"model"`
	Tokenizer string   `json:"tokenizer,omitempty"` // e.g. "gguf/gpt2 (qwen2)"; empty: ids only
	Settings  Settings `json:"settings"`
	Prompts   []Prompt `json:"prompts"`

	name string // the file it was read from, for errors
}

// ModelRef identifies the model a golden file was recorded from. SHA256 is
// the source fingerprint (quantize.Fingerprint): a qmodel carries the same
// value in its qnnprep.source.sha256 key.
type ModelRef struct {
	Path   string `json:"path"`
	Arch   string `json:"arch"`
	SHA256 string `json:"sha256"`
}

// Settings records how the expected outputs were produced.
type Settings struct {
	Decoding string `json:"decoding"` // "greedy"
	Steps    int    `json:"steps"`    // generated tokens per prompt
	TopK     int    `json:"top_k"`    // logits kept per step (0: none)
	Producer string `json:"producer"` // qnnprep version
	// KVF16 records that attention ran like llama.cpp's F16 KV cache
	// (runtime.Options.KVF16); an artifact decoded the other way differs
	// slightly, which verify warns about.
	KVF16 bool `json:"kv_f16,omitempty"`
}

// Prompt is one prompt and its expected continuation.
type Prompt struct {
	Name     string    `json:"name"`
	Text     string    `json:"text,omitempty"`
	IDs      []int32   `json:"ids"`
	Expected []int32   `json:"expected"`
	TopK     [][]Logit `json:"top_k,omitempty"` // per generated step: the k largest logits, descending
}

// Logit is one vocabulary entry's logit.
type Logit struct {
	ID    int32   `json:"id"`
	Logit float32 `json:"logit"`
}

// Read reads and validates a golden file.
func Read(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(b, path)
}

// Parse decodes and validates a golden file's bytes; name is used in
// errors.
func Parse(b []byte, name string) (*File, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("golden: %s: %w", name, err)
	}
	if f.Version != Version {
		return nil, fmt.Errorf("golden: %s: format version %d, this qnnprep reads version %d", name, f.Version, Version)
	}
	if f.Model.SHA256 == "" {
		return nil, fmt.Errorf("golden: %s: no model fingerprint (model.sha256)", name)
	}
	if f.Settings.TopK < 0 {
		return nil, fmt.Errorf("golden: %s: settings.top_k %d is negative", name, f.Settings.TopK)
	}
	if len(f.Prompts) == 0 {
		return nil, fmt.Errorf("golden: %s: no prompts: nothing to verify against", name)
	}
	for i, p := range f.Prompts {
		if len(p.IDs) == 0 {
			return nil, fmt.Errorf("golden: %s: prompt %d (%s) has no ids", name, i, p.Name)
		}
		if len(p.Expected) == 0 {
			return nil, fmt.Errorf("golden: %s: prompt %d (%s) has no expected tokens", name, i, p.Name)
		}
		if f.Settings.TopK > 0 && len(p.TopK) != len(p.Expected) {
			return nil, fmt.Errorf("golden: %s: prompt %d (%s): %d top-k steps for %d expected tokens (settings.top_k is %d)", name, i, p.Name, len(p.TopK), len(p.Expected), f.Settings.TopK)
		}
		if len(p.TopK) != 0 && len(p.TopK) != len(p.Expected) {
			return nil, fmt.Errorf("golden: %s: prompt %d (%s): %d top-k steps for %d expected tokens", name, i, p.Name, len(p.TopK), len(p.Expected))
		}
		for _, ids := range [][]int32{p.IDs, p.Expected} {
			for _, id := range ids {
				if id < 0 {
					return nil, fmt.Errorf("golden: %s: prompt %d (%s): negative token id %d", name, i, p.Name, id)
				}
			}
		}
		for s, top := range p.TopK {
			// Record keeps exactly top_k logits (it refuses a top_k above
			// the vocabulary); a shorter list would make the cosine over
			// fewer ids than declared.
			if len(top) < max(f.Settings.TopK, 1) {
				return nil, fmt.Errorf("golden: %s: prompt %d (%s), step %d: %d top-k logits, settings.top_k declares %d", name, i, p.Name, s, len(top), f.Settings.TopK)
			}
			for _, l := range top {
				if l.ID < 0 {
					return nil, fmt.Errorf("golden: %s: prompt %d (%s), step %d: negative top-k id %d", name, i, p.Name, s, l.ID)
				}
			}
		}
	}
	f.name = name
	return &f, nil
}

// CheckContext rejects a file with a prompt that, with its expected
// tokens, does not fit a context of ctxLen tokens, naming the file and the
// prompt.
func (f *File) CheckContext(ctxLen int) error {
	for i, p := range f.Prompts {
		if n := len(p.IDs) + len(p.Expected) - 1; n > ctxLen {
			return fmt.Errorf("golden: %s: prompt %d (%s): %d prompt tokens and %d expected need a context of %d, the model has %d (raise it with --ctx)",
				f.Name(), i, p.Name, len(p.IDs), len(p.Expected), n, ctxLen)
		}
	}
	return nil
}

// Name is the file f was read from ("" for a file made in memory).
func (f *File) Name() string {
	if f.name == "" {
		return "(in memory)"
	}
	return f.name
}

// Write writes f as indented JSON (deterministic), atomically.
func Write(path string, f *File) error {
	f.Version = Version
	b, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'))
}

// TopK returns the k largest logits, descending; ties by lower id.
func TopK(logits []float32, k int) []Logit {
	if k > len(logits) {
		k = len(logits)
	}
	out := make([]Logit, 0, k+1)
	for id, v := range logits {
		if len(out) == k && !better(v, int32(id), out[k-1]) {
			continue
		}
		i := sort.Search(len(out), func(i int) bool { return better(v, int32(id), out[i]) })
		out = append(out, Logit{})
		copy(out[i+1:], out[i:])
		out[i] = Logit{int32(id), v}
		if len(out) > k {
			out = out[:k]
		}
	}
	return out
}

func better(v float32, id int32, than Logit) bool {
	return v > than.Logit || (v == than.Logit && id < than.ID)
}

// Argmax returns the index of the largest logit (lowest index on ties), the
// greedy choice.
func Argmax(logits []float32) int32 {
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	return int32(best)
}

// KVWarning says how an artifact decoded with kvF16 differs from how f was
// recorded, or "" when both used the same attention rounding.
func KVWarning(f *File, kvF16 bool) string {
	if f.Settings.KVF16 == kvF16 {
		return ""
	}
	if f.Settings.KVF16 {
		return fmt.Sprintf("golden %s was recorded with --kv-f16 and the artifact is decoded without it: logits differ slightly and near-ties may flip (pass --kv-f16)", f.Name())
	}
	return fmt.Sprintf("golden %s was recorded without --kv-f16 and the artifact is decoded with it: logits differ slightly and near-ties may flip", f.Name())
}
