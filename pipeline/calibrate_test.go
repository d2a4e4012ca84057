package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/quantize"
	"github.com/qnnprep/qnnprep/shard"
)

// TestCalibrate: ranges from text are deterministic and record the text,
// the model and the settings; the split, the sample count and length and
// the statistic each change them.
func TestCalibrate(t *testing.T) {
	h := newHybrid(t)
	ctx := context.Background()
	path := text(t, 5, 12, 10)
	o := CalibOptions{Text: path, Tokenizer: h.tok, Samples: 4, Len: 16}
	a, err := Calibrate(ctx, h.qm, h.p, o)
	require.NoError(t, err)
	b, err := Calibrate(ctx, h.qm, h.p, o)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, a.Write(filepath.Join(dir, "a.json")))
	require.NoError(t, b.Write(filepath.Join(dir, "b.json")))
	ab, _ := os.ReadFile(filepath.Join(dir, "a.json"))
	bb, _ := os.ReadFile(filepath.Join(dir, "b.json"))
	assert.Equal(t, string(ab), string(bb), "same text, model and settings: same ranges file")

	fp, err := quantize.Fingerprint(h.qm)
	require.NoError(t, err)
	assert.Equal(t, onnx.CalibModel{Arch: "qwen35", SHA256: fp}, a.Model)
	require.NotNil(t, a.Text)
	data, _ := os.ReadFile(path)
	assert.Equal(t, int64(len(data)), a.Text.Bytes)
	assert.Len(t, a.Text.SHA256, 64)
	// 4 lines of 10 words, each cut to 16 tokens with BOS.
	assert.InDelta(t, 60, a.Settings.Tokens, 4)
	set := a.Settings
	set.Tokens = 0
	assert.Equal(t, onnx.CalibSettings{Source: "text", Split: SplitLines, Samples: 4, Len: 16, BOS: true, Stat: "minmax"}, set)
	// Every encoding group of the plan's graphs has a range.
	for _, g := range h.p.Graphs {
		for _, ts := range [][]string{names(g.Inputs), names(g.Outputs)} {
			for _, enc := range ts {
				if enc == "" || enc == "attention_mask" || enc == "position_ids_cos" {
					continue
				}
				assert.Contains(t, a.Ranges, enc, g.Name)
			}
		}
	}

	for _, tc := range []struct {
		name string
		edit func(o *CalibOptions)
	}{
		{"windows", func(o *CalibOptions) { o.Split = SplitWindows }},
		{"samples", func(o *CalibOptions) { o.Samples = 2 }},
		{"len", func(o *CalibOptions) { o.Len = 8 }},
		{"percentile", func(o *CalibOptions) { o.Stat = onnx.Stat{Percentile: 99} }},
	} {
		o2 := o
		tc.edit(&o2)
		c, err := Calibrate(ctx, h.qm, h.p, o2)
		require.NoError(t, err, tc.name)
		assert.NotEqual(t, a.Ranges, c.Ranges, tc.name)
		assert.NotEqual(t, a.Settings, c.Settings, tc.name)
		if tc.name == "percentile" {
			// Clipped tails: within minmax, narrower somewhere.
			narrower := false
			for k, r := range c.Ranges {
				assert.GreaterOrEqual(t, r.Min, a.Ranges[k].Min, k)
				assert.LessOrEqual(t, r.Max, a.Ranges[k].Max, k)
				narrower = narrower || r != a.Ranges[k]
			}
			assert.True(t, narrower)
		}
	}
}

func names(ts []shard.Tensor) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Encoding)
	}
	return out
}

func TestTextSamples(t *testing.T) {
	h := newHybrid(t)
	dir := t.TempDir()
	file := func(s string) string {
		p := filepath.Join(dir, strings.ReplaceAll(s[:min(len(s), 8)], "\n", "_")+".txt")
		require.NoError(t, os.WriteFile(p, []byte(s), 0o644))
		return p
	}
	bos := int32(h.tok.Vocab().BOS)
	enc := func(s string) []int32 { return h.tok.EncodeWith(s, false, false) }

	lines := "a b c\n\n  d e f g h i j k  \nl m\n"
	got, err := textSamples(CalibOptions{Text: "x", Tokenizer: h.tok, Samples: 8, Len: 6}, []byte(lines))
	require.NoError(t, err)
	want := [][]int32{
		append([]int32{bos}, enc("a b c")...),
		append([]int32{bos}, enc("d e f g h i j k")[:5]...), // cut to Len with BOS
		append([]int32{bos}, enc("l m")...),
	}
	assert.Equal(t, want, got)

	// Windows: the whole text's tokens in consecutive windows of Len.
	all := enc(lines)
	got, err = textSamples(CalibOptions{Text: "x", Tokenizer: h.tok, Split: SplitWindows, Samples: 100, Len: 5}, []byte(lines))
	require.NoError(t, err)
	var flat []int32
	for _, s := range got {
		assert.Equal(t, bos, s[0])
		assert.LessOrEqual(t, len(s), 5)
		flat = append(flat, s[1:]...)
	}
	assert.Equal(t, all, flat)

	// Fewer samples than lines: spread evenly, first line first.
	got, err = textSamples(CalibOptions{Text: "x", Tokenizer: h.tok, Samples: 2, Len: 6}, []byte(lines))
	require.NoError(t, err)
	assert.Equal(t, [][]int32{want[0], want[1]}, got)
	got, err = textSamples(CalibOptions{Text: "x", Tokenizer: h.tok, Samples: 1, Len: 6}, []byte("a\nb\nc\nd\n"))
	require.NoError(t, err)
	assert.Len(t, got, 1)

	for _, tc := range []struct {
		o    CalibOptions
		text string
		want string
	}{
		{CalibOptions{Text: file("empty"), Tokenizer: h.tok, Samples: 1, Len: 4}, "\n \n", "no text to calibrate on"},
		{CalibOptions{Text: "t.txt", Samples: 1, Len: 4}, "a", "t.txt: no tokenizer"},
		{CalibOptions{Text: "t.txt", Tokenizer: h.tok, Split: "pages", Samples: 1, Len: 4}, "a", `split "pages"`},
		{CalibOptions{Text: "t.txt", Tokenizer: h.tok, Samples: 1, Len: 1}, "a", "1 sample of 2 tokens"},
	} {
		_, err := textSamples(tc.o, []byte(tc.text))
		if assert.Error(t, err, tc.want) {
			assert.Contains(t, err.Error(), tc.want)
		}
	}
}

// TestCalibrateGreedy: without a text, a greedy decode from BOS; a text
// and a greedy decode together are refused.
func TestCalibrateGreedy(t *testing.T) {
	h := newHybrid(t)
	ctx := context.Background()
	c, err := Calibrate(ctx, h.qm, h.p, CalibOptions{Greedy: 8})
	require.NoError(t, err)
	assert.Nil(t, c.Text)
	assert.Equal(t, onnx.CalibSettings{Source: "greedy", Samples: 1, Len: 8, Tokens: 8, BOS: true, Stat: "minmax"}, c.Settings)
	assert.Contains(t, c.Ranges, "past_key_3")

	_, err = Calibrate(ctx, h.qm, h.p, CalibOptions{Greedy: 8, Text: "t.txt", Tokenizer: h.tok})
	require.ErrorContains(t, err, "not both")
	_, err = Calibrate(ctx, h.qm, h.p, CalibOptions{})
	require.ErrorContains(t, err, "no text and no greedy decode")
}
