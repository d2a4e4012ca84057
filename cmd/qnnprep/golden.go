package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/tokenizer"
)

var goldenCmd = &command{
	Name:    "golden",
	Usage:   "qnnprep golden record MODEL (--prompts FILE | --prompt-file FILE) [-n N] [--top-k K] [--kv-f16] [--ctx N] [-t THREADS] OUT",
	Summary: "record a golden file: the source model's greedy continuations and top-k logits",
	Run:     runGolden,
}

func runGolden(ctx context.Context, c *command, args []string) error {
	if len(args) == 0 || args[0] != "record" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			args = []string{"record", "--help"}
		} else {
			return usageError("want the subcommand record")
		}
	}
	fs := newFlags(c)
	promptsPath := fs.String("prompts", "", "prompts file: one prompt per line, text (tokenized with the model's tokenizer, BOS added as the vocabulary asks) or \"ids: 1 2 3\"")
	promptFile := fs.String("prompt-file", "", "one long prompt: the whole file as text, or \"ids: …\"")
	n := fs.IntP("n", "n", 64, "tokens to generate per prompt")
	topK := fs.Int("top-k", 10, "logits kept per step (0: none; verify's cosine needs them)")
	kvF16 := fs.Bool("kv-f16", false, "round attention like llama.cpp's default F16 KV cache (recorded in the golden; verify warns when an artifact is decoded the other way)")
	ctxLen := fs.Int("ctx", 0, "context length (default: the model's)")
	threads := fs.IntP("threads", "t", 2, "matmul threads (the output does not depend on it)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageError("want MODEL and OUT")
	}
	if (*promptsPath == "") == (*promptFile == "") {
		return usageError("give exactly one of --prompts and --prompt-file")
	}
	if *n < 1 {
		return usageError("-n %d: want at least 1", *n)
	}
	if *topK < 0 {
		return usageError("--top-k %d: want at least 0", *topK)
	}
	path, out := fs.Arg(0), fs.Arg(1)
	if err := checkPaths(ins(modelInput(path), []string{*promptsPath, *promptFile}), []string{out}, nil); err != nil {
		return err
	}
	m, err := model.Open(path)
	if err != nil {
		return err
	}
	defer m.Close()
	tok, _ := tokenizer.ForModel(m, path)
	prompts, err := readPrompts(*promptsPath, *promptFile, tok)
	if err != nil {
		return err
	}
	if s, ok := m.Metadata.String(quantize.KeySourceSHA256); ok && s != "" {
		fmt.Fprintf(os.Stderr, "qnnprep golden: note: %s is a qmodel; a golden file is normally recorded from the unquantized source\n", path)
	}
	sha, err := quantize.SourceFingerprint(m)
	if err != nil {
		return fmt.Errorf("%s: fingerprint: %w", path, err)
	}
	e, err := runtime.New(m, runtime.Options{Threads: *threads, Context: *ctxLen, KVF16: *kvF16})
	if err != nil {
		return err
	}
	golden.Producer = "qnnprep " + qnnprepVersion()
	start := time.Now()
	f, err := golden.Record(ctx, e, prompts, *n, *topK)
	if err != nil {
		return err
	}
	f.Model = golden.ModelRef{Path: path, Arch: string(m.Config.Arch), SHA256: sha}
	f.Settings.KVF16 = *kvF16
	if tok != nil {
		f.Tokenizer = tokenizerName(tok)
	}
	if err := golden.Write(out, f); err != nil {
		return err
	}
	total := 0
	for _, p := range prompts {
		total += len(p.IDs)
	}
	fmt.Fprintf(os.Stderr, "recorded %d prompts (%d prompt tokens) × %d tokens in %.2f s → %s\n", len(prompts), total, *n, time.Since(start).Seconds(), out)
	return nil
}

// readPrompts reads a prompts file (one per line) or one long prompt file.
func readPrompts(promptsPath, promptFile string, tok *tokenizer.Tokenizer) ([]golden.Prompt, error) {
	var encode func(string) ([]int32, error)
	if tok != nil {
		encode = func(s string) ([]int32, error) { return tok.Encode(s, true), nil }
	}
	if promptsPath != "" {
		b, err := os.ReadFile(promptsPath)
		if err != nil {
			return nil, err
		}
		return golden.ParsePrompts(b, promptsPath, encode)
	}
	b, err := os.ReadFile(promptFile)
	if err != nil {
		return nil, err
	}
	text := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	p := golden.Prompt{Name: promptFile}
	if rest, ok := strings.CutPrefix(strings.TrimSpace(text), "ids:"); ok {
		if p.IDs, err = golden.ParseIDs(rest); err != nil {
			return nil, fmt.Errorf("%s: %w", promptFile, err)
		}
	} else {
		if encode == nil {
			return nil, fmt.Errorf("%s: a text prompt, but the model has no tokenizer (write the prompt as \"ids: 1 2 3\")", promptFile)
		}
		p.Text = text
		p.IDs, _ = encode(text)
	}
	if len(p.IDs) == 0 {
		return nil, fmt.Errorf("%s: prompt has no tokens", promptFile)
	}
	return []golden.Prompt{p}, nil
}

func tokenizerName(tok *tokenizer.Tokenizer) string {
	v := tok.Vocab()
	return fmt.Sprintf("%s/%s (%d tokens)", v.Model, v.Pre, len(v.Tokens))
}
