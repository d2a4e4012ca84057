package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/tokenizer"
)

var runCmd = &command{
	Name:    "run",
	Usage:   "qnnprep run MODEL (--prompt TEXT | --ids 1,2,3) [-n N] [--json] [--logits FILE] [-t THREADS] [--ctx N] [--ignore-eos] [--kv-f16] [--plan plan.json]",
	Summary: "decode greedily with the bundled CPU runtime and report tokens/s",
	Run:     runRun,
}

func runRun(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	prompt := fs.String("prompt", "", "prompt text, tokenized with the model's tokenizer (BOS added if the vocabulary asks for it)")
	idsFlag := fs.String("ids", "", "prompt as comma-separated token ids, used as given (no BOS added)")
	n := fs.IntP("n", "n", 64, "number of tokens to generate")
	asJSON := fs.Bool("json", false, "print a JSON report instead of text")
	logitsPath := fs.String("logits", "", "write each step's logits to FILE: float32 little-endian rows of vocab_size, one per generated token")
	threads := fs.IntP("threads", "t", 2, "matmul threads (the output does not depend on it)")
	ctxLen := fs.Int("ctx", 0, "context length (default: the model's)")
	ignoreEOS := fs.Bool("ignore-eos", false, "keep generating after the end-of-sequence token")
	kvF16 := fs.Bool("kv-f16", false, "round attention like llama.cpp's default F16 KV cache")
	planPath := fs.String("plan", "", "decode through this shard plan's stages (staged executor, Genie's KV manager)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("want one MODEL (a .gguf file or an HF directory)")
	}
	if (*prompt == "") == (*idsFlag == "") {
		return usageError("give exactly one of --prompt and --ids")
	}
	if *n < 1 {
		return usageError("-n %d: want at least 1", *n)
	}
	if err := checkPaths(ins(modelInput(fs.Arg(0)), []string{*planPath}), []string{*logitsPath}, nil); err != nil {
		return err
	}
	var ids []int32
	if *idsFlag != "" {
		var err error
		if ids, err = parseIDs(*idsFlag); err != nil {
			return usageError("--ids: %v", err)
		}
	}
	m, err := model.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer m.Close()
	tok, tokErr := tokenizer.ForModel(m, fs.Arg(0))
	if *prompt != "" {
		if tokErr != nil {
			return fmt.Errorf("--prompt needs the model's tokenizer (use --ids): %w", tokErr)
		}
		if ids = tok.Encode(*prompt, true); len(ids) == 0 {
			return usageError("--prompt %q encodes to no tokens", *prompt)
		}
	}
	e, err := runtime.New(m, runtime.Options{Threads: *threads, Context: *ctxLen, KVF16: *kvF16})
	if err != nil {
		return err
	}
	var res *runResult
	if *planPath != "" {
		res, err = runPlanGreedy(ctx, e, *planPath, ids, *n, !*ignoreEOS, *logitsPath)
	} else {
		res, err = runGreedy(ctx, e, ids, *n, !*ignoreEOS, *logitsPath)
	}
	if err != nil {
		return err
	}
	res.Model = fs.Arg(0)
	if tok != nil {
		all := append(append([]int32(nil), ids...), res.Generated...)
		if bos := tok.Vocab().BOS; len(all) > 0 && all[0] == bos {
			all = all[1:] // as llama.cpp and llama2.c print it
		}
		res.Text = tok.Decode(all)
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	if tok != nil {
		fmt.Println(res.Text)
	} else {
		fmt.Println(joinIDs(res.Generated))
	}
	fmt.Fprintf(os.Stderr, "prompt: %d tokens in %.3f s (%.1f tokens/s); generation: %d tokens, %d decode steps in %.3f s (%.1f tokens/s)\n",
		len(res.Prompt), res.PromptSeconds, res.PromptTokensPerSec, len(res.Generated), max(len(res.Generated)-1, 0), res.GenSeconds, res.GenTokensPerSec)
	return nil
}

// runResult is what `run --json` prints.
type runResult struct {
	Model              string  `json:"model"`
	Prompt             []int32 `json:"prompt_ids"`
	Generated          []int32 `json:"ids"`
	Text               string  `json:"text,omitempty"` // prompt and continuation, when the model has a tokenizer
	StoppedAtEOS       bool    `json:"stopped_at_eos"`
	PromptSeconds      float64 `json:"prompt_seconds"`
	PromptTokensPerSec float64 `json:"prompt_tokens_per_s"`
	GenSeconds         float64 `json:"generation_seconds"`
	GenTokensPerSec    float64 `json:"generation_tokens_per_s"`
}

// runGreedy decodes n tokens (or up to EOS) with the whole model.
func runGreedy(ctx context.Context, e *runtime.Engine, prompt []int32, n int, stopEOS bool, logitsPath string) (*runResult, error) {
	if len(prompt)+n-1 > e.ContextLength() {
		return nil, fmt.Errorf("prompt of %d tokens plus %d generated exceed the context length %d (see --ctx)", len(prompt), n, e.ContextLength())
	}
	return greedy(ctx, e.NewState(), int32(e.Config().EOS), prompt, n, stopEOS, logitsPath)
}

// greedy decodes n tokens after prompt on d (or up to eos when stopEOS
// and eos ≥ 0), timing the prompt (up to the first token's logits) and
// the generation steps separately, and writes each step's logits to
// logitsPath if it is set.
func greedy(ctx context.Context, d runtime.Decoder, eos int32, prompt []int32, n int, stopEOS bool, logitsPath string) (*runResult, error) {
	res := &runResult{Prompt: prompt}
	var lw *bufio.Writer
	var f *atomicfile.File
	if logitsPath != "" {
		var err error
		if f, err = atomicfile.Create(logitsPath); err != nil {
			return nil, err
		}
		defer f.Abort() // a no-op after Commit
		lw = bufio.NewWriter(f)
	}
	var werr error
	start := time.Now()
	last := start
	buf := make([]byte, 4)
	err := runtime.Generate(ctx, d, prompt, n, func(s runtime.Step) bool {
		now := time.Now()
		if s.Index == 0 {
			res.PromptSeconds = now.Sub(start).Seconds()
		} else {
			res.GenSeconds += now.Sub(last).Seconds()
		}
		last = now
		res.Generated = append(res.Generated, s.Token)
		if lw != nil && werr == nil {
			for _, v := range s.Logits {
				binary.LittleEndian.PutUint32(buf, math.Float32bits(v))
				if _, werr = lw.Write(buf); werr != nil {
					break
				}
			}
		}
		if stopEOS && eos >= 0 && s.Token == eos {
			res.StoppedAtEOS = true
			return false
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if werr != nil {
		return nil, fmt.Errorf("%s: %w", logitsPath, werr)
	}
	if lw != nil {
		if err := lw.Flush(); err != nil {
			return nil, fmt.Errorf("%s: %w", logitsPath, err)
		}
		if err := f.Commit(); err != nil {
			return nil, err
		}
	}
	if res.PromptSeconds > 0 {
		res.PromptTokensPerSec = float64(len(prompt)) / res.PromptSeconds
	}
	// The first generated token comes with the prompt; the others each
	// cost one decode step.
	if steps := len(res.Generated) - 1; steps > 0 && res.GenSeconds > 0 {
		res.GenTokensPerSec = float64(steps) / res.GenSeconds
	}
	return res, nil
}

func parseIDs(s string) ([]int32, error) {
	var ids []int32
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		v, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%q is not a token id", f)
		}
		ids = append(ids, int32(v))
	}
	return ids, nil
}

func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, " ")
}
