package pipeline

import (
	"fmt"
	"os"

	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/tokenizer"
)

// defaultPromptTexts are verify's prompts for a model with a tokenizer
// (without one, DefaultPrompts' token ids).
var defaultPromptTexts = []string{"Once upon a time", "The capital of France is", "def fibonacci(n):"}

// SourceOptions fills what build and demo share for source src: paths,
// the source's tokenizer (qmodel metadata, bundle tokenizer.json, prompt
// encoding), the verify prompts (promptsPath, one per line, text or
// "ids: 1 2 3"; else defaultPromptTexts when the source has a tokenizer),
// the ONNX export settings and qnnprep's version.
func SourceOptions(src, out string, tokens int, promptsPath, version string) (Options, error) {
	o := Options{
		Source: src, OutDir: out, Tokens: tokens, QnnprepVersion: version,
		Export: onnx.ExportOptions{
			Options:   onnx.Options{Opset: 17}, // the container is the plan's
			IRVersion: 8, Producer: "qnnprep", Version: version,
		},
	}
	m, err := model.Open(src)
	if err != nil {
		return o, fmt.Errorf("%s: %w", StepQuantize, err)
	}
	defer m.Close()
	if o.Metadata, err = tokenizer.ModelMetadata(m); err != nil {
		return o, fmt.Errorf("%s: %w", StepQuantize, err)
	}
	if m.Format != "gguf" {
		if st, err := os.Stat(src); err == nil && st.IsDir() {
			if _, err := os.Stat(src + "/" + qnnpack.TokenizerName); err == nil {
				o.Tokenizer = src + "/" + qnnpack.TokenizerName
			}
		}
	}
	tok, _ := tokenizer.ForModel(m, src)
	switch {
	case promptsPath != "":
		var encode func(string) ([]int32, error)
		if tok != nil {
			encode = func(s string) ([]int32, error) { return tok.Encode(s, true), nil }
		}
		b, err := os.ReadFile(promptsPath)
		if err != nil {
			return o, err
		}
		if o.Prompts, err = golden.ParsePrompts(b, promptsPath, encode); err != nil {
			return o, err
		}
	case tok != nil:
		for _, text := range defaultPromptTexts {
			if ids := tok.Encode(text, true); len(ids) > 0 {
				o.Prompts = append(o.Prompts, golden.Prompt{Name: text, Text: text, IDs: ids})
			}
		}
	}
	return o, nil
}
