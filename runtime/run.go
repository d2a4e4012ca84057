package runtime

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/tokenizer"
)

// RunOptions is one timed greedy decode (qnnprep run).
type RunOptions struct {
	Prompt  []int32 // token ids, used as given
	Tokens  int     // tokens to generate
	StopEOS bool    // stop after the model's end-of-sequence token

	// Plan, if set, decodes through its stages with the staged executor
	// (each stage one graph call over the plan's I/O tensors, Genie's KV
	// manager between calls) instead of the whole model.
	Plan *shard.Plan

	// Logits, if set, is a file that receives each step's logits: float32
	// little-endian rows of the vocabulary size, one per generated token.
	// It is written atomically and only when the decode succeeds.
	Logits string

	// Tokenizer, if set, turns the prompt and continuation into
	// RunResult.Text.
	Tokenizer *tokenizer.Tokenizer

	// OnToken, if set, is called with each generated token as soon as it
	// is chosen, in the order of RunResult.Generated (the end-of-sequence
	// token that ends a decode with StopEOS included): qnnprep run prints
	// the text as it comes. Its time is left out of the timings. An error
	// from it ends the decode, and Run returns it.
	OnToken func(id int32) error
}

// RunResult is what a run decoded and how fast (qnnprep run --json).
type RunResult struct {
	Model              string  `json:"model"`
	Prompt             []int32 `json:"prompt_ids"`
	Generated          []int32 `json:"ids"`
	Text               string  `json:"text,omitempty"` // prompt and continuation, when there is a tokenizer
	StoppedAtEOS       bool    `json:"stopped_at_eos"`
	PromptSeconds      float64 `json:"prompt_seconds"`
	PromptTokensPerSec float64 `json:"prompt_tokens_per_s"`
	GenSeconds         float64 `json:"generation_seconds"`
	GenTokensPerSec    float64 `json:"generation_tokens_per_s"`

	// Calls are the staged executor's graph calls per variant, with Plan.
	Calls []StagedCalls `json:"-"`
}

// Run decodes o.Tokens tokens after o.Prompt greedily on e, or through
// o.Plan's stages, up to the end-of-sequence token with o.StopEOS. It
// times the prompt (up to the first token's logits) and the generation
// steps separately.
func Run(ctx context.Context, e *Engine, o RunOptions) (*RunResult, error) {
	var d Decoder
	var st *Staged
	if o.Plan != nil {
		var err error
		if st, err = NewStaged(e, o.Plan); err != nil {
			return nil, err
		}
		d = st
	} else {
		if len(o.Prompt)+o.Tokens-1 > e.ContextLength() {
			return nil, fmt.Errorf("prompt of %d tokens plus %d generated exceed the context length %d (see --ctx)", len(o.Prompt), o.Tokens, e.ContextLength())
		}
		d = e.NewState()
	}
	res, err := timedGreedy(ctx, d, int32(e.Config().EOS), o)
	if err != nil {
		return nil, err
	}
	if st != nil {
		res.Calls = st.Calls()
	}
	if o.Tokenizer != nil {
		all := append(append([]int32(nil), o.Prompt...), res.Generated...)
		if bos := o.Tokenizer.Vocab().BOS; len(all) > 0 && all[0] == bos {
			all = all[1:] // as llama.cpp and llama2.c print it
		}
		res.Text = o.Tokenizer.Decode(all)
	}
	return res, nil
}

// timedGreedy is Run's decode on d (eos < 0: none).
func timedGreedy(ctx context.Context, d Decoder, eos int32, o RunOptions) (*RunResult, error) {
	res := &RunResult{Prompt: o.Prompt}
	var lw *bufio.Writer
	var f *atomicfile.File
	if o.Logits != "" {
		var err error
		if f, err = atomicfile.Create(o.Logits); err != nil {
			return nil, err
		}
		defer f.Abort() // a no-op after Commit
		lw = bufio.NewWriter(f)
	}
	var werr, herr error
	start := time.Now()
	last := start
	buf := make([]byte, 4)
	err := Generate(ctx, d, o.Prompt, o.Tokens, func(s Step) bool {
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
		if o.OnToken != nil {
			if herr = o.OnToken(s.Token); herr != nil {
				return false
			}
			last = time.Now() // the caller's time is not the decode's
		}
		if o.StopEOS && eos >= 0 && s.Token == eos {
			res.StoppedAtEOS = true
			return false
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if herr != nil {
		return nil, herr
	}
	if werr != nil {
		return nil, fmt.Errorf("%s: %w", o.Logits, werr)
	}
	if lw != nil {
		if err := lw.Flush(); err != nil {
			return nil, fmt.Errorf("%s: %w", o.Logits, err)
		}
		if err := f.Commit(); err != nil {
			return nil, err
		}
	}
	if res.PromptSeconds > 0 {
		res.PromptTokensPerSec = float64(len(o.Prompt)) / res.PromptSeconds
	}
	// The first generated token comes with the prompt; the others each
	// cost one decode step.
	if steps := len(res.Generated) - 1; steps > 0 && res.GenSeconds > 0 {
		res.GenTokensPerSec = float64(steps) / res.GenSeconds
	}
	return res, nil
}
