package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/quantize"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/tokenizer"
)

// Calibration splits.
const (
	SplitLines   = "lines"   // one sample per non-empty line
	SplitWindows = "windows" // the whole text's tokens cut into windows
)

// CalibOptions say what Calibrate runs through the model: samples of a
// text (Text set) or a greedy decode (Greedy > 0).
type CalibOptions struct {
	// Text is a calibration text file, tokenized with Tokenizer: with
	// Split "lines" (the default) each non-empty line is a sample, cut
	// to Len tokens; with "windows" the whole file's tokens are cut into
	// consecutive windows of Len tokens. Samples of them, spread evenly
	// over the file, are used (all when there are fewer). Every sample
	// starts with BOS when the tokenizer adds one.
	Text      string
	Tokenizer *tokenizer.Tokenizer
	Split     string
	Samples   int // 0 means 16
	Len       int // 0 means 128

	// Greedy, without Text, decodes this many tokens greedily after
	// Start (the model's BOS, or token 0 without one, when empty) and
	// calibrates on the sequence.
	Greedy int
	Start  []int32

	Stat    onnx.Stat
	Threads int // matmul threads (0: 2); ranges do not depend on it
}

// calibChunk is how many tokens of a sample run through a layer at once:
// the DeltaNet state snapshots it takes cost (K−1)·conv_dim + Hv·Dk·Dv
// floats per token.
const calibChunk = 16

// Calibrate runs the samples o describes through model m, stage by stage
// as plan p cuts it, and returns the range of every encoding group of p's
// graphs by o.Stat: each stage's hidden_states output, logits and
// last_hidden_states; per attention layer the keys and values entering
// the cache (past_key_L, past_value_L); per DeltaNet layer the conv and
// recurrent state every token leaves (past_conv_L, past_ssm_L; the plan
// keeps past_ssm in float32, so that range is recorded but no encoding
// uses it). One range per group gives a state's _in and _out one
// encoding, as Genie requires. The result records the model's
// fingerprint, the text's SHA-256 and the settings; the same inputs give
// the same ranges.
func Calibrate(ctx context.Context, m *model.Model, p *shard.Plan, o CalibOptions) (*onnx.Calibration, error) {
	if err := p.Fits(m.Config); err != nil {
		return nil, fmt.Errorf("calibration: %w", err)
	}
	o.Samples, o.Len = cmpOr(o.Samples, 16), cmpOr(o.Len, 128)
	cal := &onnx.Calibration{Version: onnx.CalibrationVersion, Settings: onnx.CalibSettings{Stat: o.Stat.String()}}
	var samples [][]int32
	switch {
	case o.Text != "":
		if o.Greedy > 0 {
			return nil, errors.New("calibration: give a text or a greedy decode, not both")
		}
		data, err := os.ReadFile(o.Text)
		if err != nil {
			return nil, fmt.Errorf("calibration: %w", err)
		}
		sum := sha256.Sum256(data)
		cal.Text = &onnx.CalibText{SHA256: hex.EncodeToString(sum[:]), Bytes: int64(len(data))}
		if samples, err = textSamples(o, data); err != nil {
			return nil, err
		}
		cal.Settings.Source, cal.Settings.Split, cal.Settings.Len = "text", cmpOr(o.Split, SplitLines), o.Len
	case o.Greedy > 0:
		start := o.Start
		if len(start) == 0 {
			start = []int32{int32(max(m.Config.BOS, 0))} // token 0 without a BOS
		}
		if c := m.Config.ContextLength; c > 0 && len(start)+o.Greedy > c {
			return nil, fmt.Errorf("calibration: %d tokens exceed the context length %d", len(start)+o.Greedy, c)
		}
		seq, err := greedySample(ctx, m, start, o)
		if err != nil {
			return nil, err
		}
		samples = [][]int32{seq}
		cal.Settings.Source, cal.Settings.Len = "greedy", o.Greedy
	default:
		return nil, errors.New("calibration: no text and no greedy decode")
	}
	bos := int32(m.Config.BOS)
	cal.Settings.Samples, cal.Settings.BOS = len(samples), true
	longest := 0
	for _, s := range samples {
		cal.Settings.Tokens += len(s)
		cal.Settings.BOS = cal.Settings.BOS && bos >= 0 && s[0] == bos
		longest = max(longest, len(s))
	}
	c := onnx.NewRangeCollector(o.Stat)
	e, err := runtime.New(m, runtime.Options{Threads: o.Threads, Context: longest})
	if err != nil {
		return nil, fmt.Errorf("calibration: %w", err)
	}
	for i, s := range samples {
		if err := calibrateSample(ctx, e, p, s, c); err != nil {
			return nil, fmt.Errorf("calibration: sample %d: %w", i, err)
		}
	}
	cal.Ranges = c.Ranges()
	fp, err := quantize.Fingerprint(m)
	if err != nil {
		return nil, fmt.Errorf("calibration: %s: %w", m.Path, err)
	}
	cal.Model = onnx.CalibModel{Arch: string(m.Config.Arch), SHA256: fp}
	return cal, nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// textSamples tokenizes a calibration text into at most o.Samples samples
// of at most o.Len tokens (BOS included), spread evenly over the text.
func textSamples(o CalibOptions, data []byte) ([][]int32, error) {
	if o.Tokenizer == nil {
		return nil, fmt.Errorf("calibration: %s: no tokenizer for the text", o.Text)
	}
	if o.Samples < 1 || o.Len < 2 {
		return nil, fmt.Errorf("calibration: %d samples of %d tokens: want at least 1 sample of 2 tokens", o.Samples, o.Len)
	}
	v := o.Tokenizer.Vocab()
	var head []int32
	if v.AddBOS {
		head = []int32{v.BOS}
	}
	enc := func(s string) []int32 { return o.Tokenizer.EncodeWith(s, false, false) }
	var all [][]int32
	switch cmpOr(o.Split, SplitLines) {
	case SplitLines:
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, len(data)+1)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" {
				continue
			}
			ids := append(append([]int32(nil), head...), enc(line)...)
			all = append(all, ids[:min(len(ids), o.Len)])
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("calibration: %s: %w", o.Text, err)
		}
	case SplitWindows:
		ids := enc(string(data))
		w := o.Len - len(head)
		for i := 0; i < len(ids); i += w {
			all = append(all, append(append([]int32(nil), head...), ids[i:min(i+w, len(ids))]...))
		}
	default:
		return nil, fmt.Errorf("calibration: split %q: want %s or %s", o.Split, SplitLines, SplitWindows)
	}
	// A sample of BOS alone says nothing about text.
	kept := all[:0]
	for _, s := range all {
		if len(s) > len(head) {
			kept = append(kept, s)
		}
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("calibration: %s: no text to calibrate on", o.Text)
	}
	if len(kept) <= o.Samples {
		return kept, nil
	}
	out := make([][]int32, o.Samples)
	for i := range out {
		out[i] = kept[i*len(kept)/o.Samples]
	}
	return out, nil
}

// greedySample is start followed by the first o.Greedy−1 tokens a greedy
// decode generates after it: the tokens a greedy decode of o.Greedy steps
// runs through the model.
func greedySample(ctx context.Context, m *model.Model, start []int32, o CalibOptions) ([]int32, error) {
	e, err := runtime.New(m, runtime.Options{Threads: o.Threads, Context: len(start) + o.Greedy})
	if err != nil {
		return nil, fmt.Errorf("calibration: %w", err)
	}
	gen, err := e.Greedy(ctx, start, o.Greedy)
	if err != nil {
		return nil, fmt.Errorf("calibration: %w", err)
	}
	return append(append([]int32(nil), start...), gen[:len(gen)-1]...), nil
}

// calibrateSample runs one sample from position 0 through e, layer by
// layer in chunks of calibChunk tokens, and adds what every encoding
// group of p takes to c.
func calibrateSample(ctx context.Context, e *runtime.Engine, p *shard.Plan, sample []int32, c *onnx.RangeCollector) error {
	cfg := e.Config()
	kvDim := cfg.KVHeads * cfg.HeadDim
	st := e.NewState()
	st.SetRollback(calibChunk)
	x := make([]float32, calibChunk*cfg.Hidden)
	logits := make([]float32, calibChunk*cfg.VocabSize)
	for at := 0; at < len(sample); at += calibChunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		toks := sample[at:min(at+calibChunk, len(sample))]
		t := len(toks)
		x := x[:t*cfg.Hidden]
		if err := e.Embed(toks, x); err != nil {
			return err
		}
		for _, s := range p.Stages {
			for l := s.FirstLayer; l <= s.LastLayer; l++ {
				if err := st.RunLayers(l, l+1, x, nil, nil); err != nil {
					return err
				}
				if cfg.LayerKinds[l] == model.DeltaNet {
					err := st.DeltaNetSnapshots(l, func(conv, ssm []float32) error {
						if err := c.Add(fmt.Sprintf("past_conv_%d", l), conv); err != nil {
							return err
						}
						return c.Add(fmt.Sprintf("past_ssm_%d", l), ssm)
					})
					if err != nil {
						return err
					}
					// Read; keep the next chunk's snapshots only.
					st.SetRollback(0)
					st.SetRollback(calibChunk)
					continue
				}
				k, v := st.KV(l)
				if err := c.Add(fmt.Sprintf("past_key_%d", l), k[at*kvDim:]); err != nil {
					return err
				}
				if err := c.Add(fmt.Sprintf("past_value_%d", l), v[at*kvDim:]); err != nil {
					return err
				}
			}
			if !s.Head {
				if err := c.Add(shard.HiddenStates(s.Index), x); err != nil {
					return err
				}
				continue
			}
			if err := c.Add(shard.LastHiddenStates, x); err != nil {
				return err
			}
			lg := logits[:t*cfg.VocabSize]
			if err := st.Head(x, lg); err != nil {
				return err
			}
			if err := c.Add(shard.Logits, lg); err != nil {
				return err
			}
		}
	}
	return nil
}
