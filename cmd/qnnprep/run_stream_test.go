package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/tokenizer"
)

// chunkWriter records each Write and how many tokens had been generated
// when it came.
type chunkWriter struct {
	chunks []string
	at     []int // tokens generated at each chunk
	tokens int
	fail   error
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	if w.fail != nil {
		return 0, w.fail
	}
	w.chunks = append(w.chunks, string(p))
	w.at = append(w.at, w.tokens)
	return len(p), nil
}

// storiesTokenizer is the stories GGUF's tokenizer (SPM, byte fallback,
// AddSpacePrefix, BOS 1, EOS 2 "</s>").
func storiesTokenizer(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	m, err := model.Open(storiesGGUF)
	require.NoError(t, err)
	defer m.Close()
	tok, err := tokenizer.ForModel(m, storiesGGUF)
	require.NoError(t, err)
	return tok
}

// storiesEngine opens the stories GGUF (closed when t ends) with its
// tokenizer and a one-thread engine.
func storiesEngine(t *testing.T) (*model.Model, *tokenizer.Tokenizer, *runtime.Engine) {
	t.Helper()
	m, err := model.Open(storiesGGUF)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	tok, err := tokenizer.ForModel(m, storiesGGUF)
	require.NoError(t, err)
	e, err := runtime.New(m, runtime.Options{Threads: 1})
	require.NoError(t, err)
	return m, tok, e
}

// textStream prints what run printed at the end before it streamed (the
// whole text's Decode, or the generated ids, and a newline), in chunks as
// the tokens come: the prompt's text with the first token, then each
// token's text once its UTF-8 characters are complete (byte-fallback
// pieces of an emoji or CJK character held back until the last one).
func TestTextStream(t *testing.T) {
	tok := storiesTokenizer(t)
	id := func(piece string) int32 {
		id, ok := tok.ID(piece)
		require.True(t, ok, piece)
		return id
	}
	bytesOf := func(s string) []int32 {
		var ids []int32
		for _, b := range []byte(s) {
			ids = append(ids, id(fmt.Sprintf("<0x%02X>", b)))
		}
		return ids
	}
	once := []int32{1, id("▁Once"), id("▁upon")} // BOS "Once upon"
	eos := tok.Vocab().EOS
	for _, c := range []struct {
		name      string
		noTok     bool
		prompt    []int32
		generated []int32
		want      []string
	}{
		{"words", false, once, []int32{id("▁a"), id("▁time"), id(".")}, []string{"Once upon a", " time", ".", "\n"}},
		{"emoji in byte tokens", false, once, slices.Concat(bytesOf("🦙"), []int32{id("▁a")}), []string{"Once upon", "🦙", " a", "\n"}},
		{"CJK in byte tokens", false, once, slices.Concat([]int32{id("▁a")}, bytesOf("你好"), []int32{id(".")}),
			[]string{"Once upon a", "你", "好", ".", "\n"}},
		{"emoji first, prompt only BOS", false, []int32{1}, slices.Concat(bytesOf("🦙"), []int32{id("▁a")}), []string{"🦙", " a", "\n"}},
		{"leading space removed", false, []int32{1}, []int32{id("▁Once"), id("▁upon")}, []string{"Once", " upon", "\n"}},
		{"prompt without BOS", false, []int32{id("▁Once")}, []int32{id("▁upon")}, []string{"Once upon", "\n"}},
		{"stopped at EOS", false, once, []int32{id("▁a"), id("▁time"), eos}, []string{"Once upon a", " time", "</s>", "\n"}},
		{"stopped inside a character", false, once, slices.Concat([]int32{id("▁a")}, bytesOf("\xf0\x9f")), []string{"Once upon a", "\xf0\x9f\n"}},
		{"no tokenizer: ids", true, once, []int32{5, 9, 17}, []string{"5", " 9", " 17", "\n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var w chunkWriter
			tk := tok
			if c.noTok {
				tk = nil
			}
			s := newTextStream(&w, tk, c.prompt)
			for i, id := range c.generated {
				w.tokens = i + 1
				require.NoError(t, s.token(id))
			}
			require.NoError(t, s.close())
			assert.Equal(t, c.want, w.chunks)
			// What run printed at the end before it streamed.
			before := joinIDs(c.generated) + "\n"
			if !c.noTok {
				before = tok.Decode(slices.Concat(c.prompt[1:], c.generated)) + "\n"
				if c.prompt[0] != 1 {
					before = tok.Decode(slices.Concat(c.prompt, c.generated)) + "\n"
				}
			}
			assert.Equal(t, before, strings.Join(w.chunks, ""))
			if utf8.ValidString(before) {
				for _, ch := range w.chunks {
					assert.True(t, utf8.ValidString(ch), "chunk %q", ch)
				}
			}
		})
	}

	// Nothing is written for a decode that fails before its first token.
	var w chunkWriter
	require.NoError(t, newTextStream(&w, tok, once).close())
	require.Empty(t, w.chunks)
	// A write error is returned, by the token and by close.
	w.fail = errors.New("disk full")
	s := newTextStream(&w, tok, once)
	require.ErrorIs(t, s.token(id("▁a")), w.fail)
	require.ErrorIs(t, s.close(), w.fail)
}

// run streams: decoding the stories model, the text comes in many writes
// while it is generated, each valid UTF-8, and together they are what run
// printed at the end before (RunResult.Text and a newline); a write error
// ends the decode.
func TestRunStreams(t *testing.T) {
	m, tok, e := storiesEngine(t)
	for _, c := range []struct {
		prompt string
		n      int
		plan   bool
	}{{"Once upon a time", 60, false}, {"你好 🦙 and é", 30, false}, {"Lily", 20, true}} {
		t.Run(c.prompt, func(t *testing.T) {
			var w chunkWriter
			ids := tok.Encode(c.prompt, true)
			s := newTextStream(&w, tok, ids)
			o := runtime.RunOptions{Prompt: ids, Tokens: c.n, StopEOS: true, Tokenizer: tok, OnToken: func(id int32) error {
				w.tokens++
				return s.token(id)
			}}
			if c.plan {
				var err error
				o.Plan, err = shard.PlanModel(m, shard.Options{Stages: 2, AR: []int{32, 1}, CL: []int{128}})
				require.NoError(t, err)
			}
			res, err := runtime.Run(context.Background(), e, o)
			require.NoError(t, err)
			require.NoError(t, s.close())
			require.Equal(t, res.Text+"\n", strings.Join(w.chunks, ""))
			require.Len(t, res.Generated, c.n)
			// The prompt comes with the first token, the rest as generated:
			// a write for (nearly) every token, not one at the end.
			require.Equal(t, 1, w.at[0])
			require.Greater(t, len(w.chunks), c.n*3/4)
			require.True(t, slices.IsSorted(w.at))
			for _, ch := range w.chunks {
				require.True(t, utf8.ValidString(ch), "chunk %q", ch)
			}
		})
	}
	w := chunkWriter{fail: errors.New("disk full")}
	ids := tok.Encode("Once", true)
	s := newTextStream(&w, tok, ids)
	calls := 0
	_, err := runtime.Run(context.Background(), e, runtime.RunOptions{Prompt: ids, Tokens: 20, OnToken: func(id int32) error {
		calls++
		return s.token(id)
	}})
	require.ErrorIs(t, err, w.fail)
	require.Equal(t, 1, calls, "the decode goes on after its output failed")
}

// The command's output is the text of --json's report (the whole
// decode) and a newline, for prompts spelled with byte-fallback tokens
// too; without a tokenizer, the ids.
func TestRunCommandStreamedText(t *testing.T) {
	hf := filepath.Join(filepath.Dir(storiesGGUF), "hf")
	for _, args := range [][]string{
		{storiesGGUF, "--prompt", "你好 🦙, émoji", "-n", "24"},
		{storiesGGUF, "--prompt", "Once upon a time", "-n", "40", "--ignore-eos"},
		{storiesGGUF, "--ids", "403,407", "-n", "16"},
		{storiesGGUF, "--ids", "1,243,162,169,156", "-n", "16"}, // BOS and 🦙 in byte tokens
		{hf, "--ids", "1,5,9", "-n", "12"},
	} {
		t.Run(filepath.Base(args[0])+" "+strings.Join(args[1:], " "), func(t *testing.T) {
			args := append([]string{"run"}, append(args, "-t", "1")...)
			var res runtime.RunResult
			require.NoError(t, json.Unmarshal([]byte(runOK(t, append(args, "--json")...)), &res))
			want := res.Text + "\n"
			if res.Text == "" {
				want = joinIDs(res.Generated) + "\n"
			}
			var code int
			out := captureStdout(t, func() { code = run(args) })
			require.Equal(t, 0, code)
			require.Equal(t, want, out)
		})
	}
}

// speculate streams too: the speculative decode's text comes in writes
// window by window, whole and through a plan, and together they are run's
// text for the same prompt (the tokens are greedy's) and a newline; a
// write error ends the decode.
func TestSpeculateStreams(t *testing.T) {
	m, tok, e := storiesEngine(t)
	p, err := shard.PlanModel(m, shard.Options{Stages: 2, AR: []int{32, 1}, CL: []int{128}})
	require.NoError(t, err)
	planPath := filepath.Join(t.TempDir(), "plan.json")
	require.NoError(t, shard.WritePlan(planPath, p))
	const n = 40
	ids := tok.Encode("Once upon a time", true)
	greedy, err := runtime.Run(context.Background(), e, runtime.RunOptions{Prompt: ids, Tokens: n, Tokenizer: tok})
	require.NoError(t, err)
	compare := func(plan string, onToken func(int32) error) (*runtime.Comparison, error) {
		return runtime.CompareSpeculative(context.Background(), e, m, runtime.CompareOptions{
			Drafts: runtime.DraftSource{Model: storiesGGUF}, Options: runtime.Options{Threads: 1},
			Plan: plan, Prompt: ids, Tokens: n, K: 3, OnToken: onToken,
		})
	}
	for _, plan := range []string{"", planPath} {
		t.Run("plan="+filepath.Base(plan), func(t *testing.T) {
			var w chunkWriter
			s := newTextStream(&w, tok, ids)
			res, err := compare(plan, func(id int32) error {
				w.tokens++
				return s.token(id)
			})
			require.NoError(t, err)
			require.NoError(t, s.close())
			require.True(t, res.EqualsGreedy)
			require.Equal(t, greedy.Text+"\n", strings.Join(w.chunks, ""))
			require.Equal(t, n, w.tokens)
			require.Equal(t, 1, w.at[0])
			require.Greater(t, len(w.chunks), res.Stats.Windows/2)
			require.True(t, slices.IsSorted(w.at))
		})
	}
	w := chunkWriter{fail: errors.New("disk full")}
	s := newTextStream(&w, tok, ids)
	calls := 0
	_, err = compare("", func(id int32) error {
		calls++
		return s.token(id)
	})
	require.ErrorIs(t, err, w.fail)
	require.Equal(t, 1, calls, "the decode goes on after its output failed")
}
