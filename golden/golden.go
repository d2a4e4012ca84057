// Package golden records what a model is expected to generate and checks
// artifacts against it: exact-match length, first divergence, teacher-forced
// top-1 agreement, logit cosine, and degeneration such as a token or a short
// cycle repeating where the golden output does not.
package golden

import (
	"bytes"
	"encoding/json"
	"errors"
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
	for i, p := range f.Prompts {
		if len(p.IDs) == 0 {
			return nil, fmt.Errorf("golden: %s: prompt %d (%s) has no ids", name, i, p.Name)
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
			for _, l := range top {
				if l.ID < 0 {
					return nil, fmt.Errorf("golden: %s: prompt %d (%s), step %d: negative top-k id %d", name, i, p.Name, s, l.ID)
				}
			}
		}
	}
	return &f, nil
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

// ErrModelMismatch is returned when an artifact was not made from the model
// a golden file was recorded from.
var ErrModelMismatch = errors.New("model fingerprint does not match the golden file")

// CheckModel refuses an artifact whose source fingerprint differs from the
// golden's.
func (f *File) CheckModel(sha string) error {
	if sha == "" {
		return fmt.Errorf("%w: the artifact has no source fingerprint (qnnprep.source.sha256)", ErrModelMismatch)
	}
	if sha != f.Model.SHA256 {
		return fmt.Errorf("%w: golden was recorded from %s (sha256 %.16s…), the artifact comes from sha256 %.16s…",
			ErrModelMismatch, f.Model.Path, f.Model.SHA256, sha)
	}
	return nil
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
