package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
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
	o := runtime.RunOptions{Prompt: ids, Tokens: *n, StopEOS: !*ignoreEOS, Logits: *logitsPath, Tokenizer: tok}
	if *planPath != "" {
		if o.Plan, err = shard.ReadPlan(*planPath); err != nil {
			return err
		}
	}
	var out *textStream
	if !*asJSON {
		out = newTextStream(os.Stdout, tok, ids)
		o.OnToken = out.token
	}
	res, err := runtime.Run(ctx, e, o)
	if out != nil {
		// The text so far ends its line even when the decode failed. A
		// write error (which ends the decode) is the output's, not the
		// plan's.
		if cerr := out.close(); cerr != nil && (err == nil || errors.Is(err, cerr)) {
			return cerr
		}
	}
	if err != nil {
		if o.Plan != nil {
			return fmt.Errorf("--plan %s: %w", *planPath, err)
		}
		return err
	}
	res.Model = fs.Arg(0)
	if o.Plan != nil {
		var calls []string
		for _, c := range res.Calls {
			calls = append(calls, fmt.Sprintf("%d on AR %d CL %d", c.Calls, c.AR, c.CL))
		}
		fmt.Fprintf(os.Stderr, "plan %s: %d stages; graph calls: %s\n", *planPath, len(o.Plan.Stages), strings.Join(calls, ", "))
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprintf(os.Stderr, "prompt: %d tokens in %.3f s (%.1f tokens/s); generation: %d tokens, %d decode steps in %.3f s (%.1f tokens/s)\n",
		len(res.Prompt), res.PromptSeconds, res.PromptTokensPerSec, len(res.Generated), max(len(res.Generated)-1, 0), res.GenSeconds, res.GenTokensPerSec)
	return nil
}

// A textStream prints a run's output as it is generated: with a
// tokenizer, the text runtime.Run puts in RunResult.Text (the prompt's,
// without a leading BOS, then the continuation's), each token's as soon as
// it completes a UTF-8 character; without one, the generated ids separated
// by spaces, as joinIDs prints them. close ends the line. Each token's
// text is one Write on w, unbuffered, so a pipe sees it at once; nothing
// is written before the first token, so a decode that fails at the prompt
// prints nothing.
type textStream struct {
	w      io.Writer
	d      *tokenizer.StreamDecoder // nil without a tokenizer
	prompt []int32                  // decoded with the first token
	buf    []byte
	n      int // tokens written
	err    error
}

func newTextStream(w io.Writer, tok *tokenizer.Tokenizer, prompt []int32) *textStream {
	s := &textStream{w: w}
	if tok != nil {
		s.d = tok.NewStreamDecoder()
		if len(prompt) > 0 && prompt[0] == tok.Vocab().BOS {
			prompt = prompt[1:] // as runtime.Run's Text
		}
		s.prompt = prompt
	}
	return s
}

// token writes id's text, and before the first token the prompt's.
func (s *textStream) token(id int32) error {
	s.buf = s.buf[:0]
	if s.d == nil {
		if s.n > 0 {
			s.buf = append(s.buf, ' ')
		}
		s.buf = strconv.AppendInt(s.buf, int64(id), 10)
	} else {
		if s.n == 0 {
			for _, p := range s.prompt {
				s.buf = append(s.buf, s.d.Add(p)...)
			}
		}
		s.buf = append(s.buf, s.d.Add(id)...)
	}
	s.n++
	return s.write()
}

// close writes what the decoder held back (an unfinished UTF-8 character)
// and the newline, once a token was written; it returns the first write
// error.
func (s *textStream) close() error {
	if s.n > 0 && s.err == nil {
		s.buf = s.buf[:0]
		if s.d != nil {
			s.buf = append(s.buf, s.d.Flush()...)
		}
		s.buf = append(s.buf, '\n')
		s.write()
	}
	return s.err
}

func (s *textStream) write() error {
	if len(s.buf) > 0 && s.err == nil {
		if _, err := s.w.Write(s.buf); err != nil {
			s.err = fmt.Errorf("writing the output: %w", err)
		}
	}
	return s.err
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
