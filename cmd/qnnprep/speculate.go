package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/tokenizer"
)

var speculateCmd = &command{
	Name:    "speculate",
	Usage:   "qnnprep speculate MODEL (--draft MODEL | --eagle3 HEAD | --mtp) [-k K] (--prompt TEXT | --ids 1,2,3 | --prompt-file FILE) [-n N] [--plan plan.json] [--json] [--ctx N] [-t THREADS]",
	Summary: "decode with a draft model or EAGLE-3 head (exact greedy acceptance) and compare with plain greedy",
	Run:     runSpeculate,
}

func runSpeculate(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	draftPath := fs.String("draft", "", "draft model sharing the target's vocabulary")
	eaglePath := fs.String("eagle3", "", "EAGLE-3 draft head: GGUF (architecture eagle3) or a Hugging Face directory")
	useMTP := fs.Bool("mtp", false, "draft with the model's own MTP block (qwen35 GGUF with nextn_predict_layers)")
	k := fs.IntP("k", "k", 4, "draft tokens per window")
	prompt := fs.String("prompt", "", "prompt text, tokenized with the model's tokenizer")
	idsFlag := fs.String("ids", "", "prompt as comma-separated token ids")
	promptFile := fs.String("prompt-file", "", "prompt from a file (text, or \"ids: 1 2 3\")")
	n := fs.IntP("n", "n", 64, "tokens to generate")
	planPath := fs.String("plan", "", "decode through this shard plan's stages (greedy and speculative, with any drafter)")
	asJSON := fs.Bool("json", false, "print a JSON report")
	ctxLen := fs.Int("ctx", 0, "context length (default: the model's)")
	threads := fs.IntP("threads", "t", 2, "matmul threads (the output does not depend on it)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("want one MODEL (the target)")
	}
	if n := btoi(*draftPath != "") + btoi(*eaglePath != "") + btoi(*useMTP); n != 1 {
		return usageError("give exactly one of --draft, --eagle3 and --mtp")
	}
	given := 0
	for _, s := range []string{*prompt, *idsFlag, *promptFile} {
		if s != "" {
			given++
		}
	}
	if given != 1 {
		return usageError("give exactly one of --prompt, --ids and --prompt-file")
	}
	if *k < 1 || *n < 1 {
		return usageError("-k %d, -n %d: want at least 1", *k, *n)
	}
	path := fs.Arg(0)
	m, err := model.Open(path)
	if err != nil {
		return err
	}
	defer m.Close()
	tok, tokErr := tokenizer.ForModel(m, path)
	var ids []int32
	switch {
	case *idsFlag != "":
		if ids, err = parseIDs(*idsFlag); err != nil {
			return usageError("--ids: %v", err)
		}
	case *prompt != "":
		if tokErr != nil {
			return fmt.Errorf("--prompt needs the model's tokenizer (use --ids): %w", tokErr)
		}
		if ids = tok.Encode(*prompt, true); len(ids) == 0 {
			return usageError("--prompt %q encodes to no tokens", *prompt)
		}
	default:
		ps, err := readPrompts("", *promptFile, tok)
		if err != nil {
			return err
		}
		ids = ps[0].IDs
	}
	opt := runtime.Options{Threads: *threads, Context: *ctxLen}
	target, err := runtime.New(m, opt)
	if err != nil {
		return err
	}
	co := runtime.CompareOptions{
		Drafts:  runtime.DraftSource{Model: *draftPath, Eagle3: *eaglePath, MTP: *useMTP},
		Options: opt, Plan: *planPath, Prompt: ids, Tokens: *n, K: *k,
	}
	var out *textStream
	if !*asJSON {
		// The speculative decode's text (prompt and continuation, as run
		// prints them), window by window as it is accepted; the greedy
		// pass it is compared with runs first, silently.
		out = newTextStream(os.Stdout, tok, ids)
		co.OnToken = out.token
	}
	res, err := runtime.CompareSpeculative(ctx, target, m, co)
	if out != nil {
		if cerr := out.close(); cerr != nil && (err == nil || errors.Is(err, cerr)) {
			return cerr
		}
	}
	if err != nil {
		return err
	}
	res.Model = path
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(os.Stderr, "%s, K=%d: acceptance length %.2f of %d (%.2f tokens per target call), %.3f target calls per token\n",
			res.Drafter, *k, res.AcceptanceLength, *k, res.TokensPerWindow, res.TargetCallsPerToken)
		fmt.Fprintf(os.Stderr, "greedy %.1f tokens/s, speculative %.1f tokens/s (%d tokens after the first); equal to greedy: %v\n",
			res.GreedyTokensPerSec, res.SpecTokensPerSec, *n-1, res.EqualsGreedy)
	}
	if !res.EqualsGreedy {
		return fmt.Errorf("speculative output differs from greedy decoding: a runtime bug")
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
