package runtime_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
)

// TestRun: the logits file holds one row per generated token whose argmax
// is that token, through a plan it is byte-identical to the whole model's,
// StopEOS ends the decode at the end-of-sequence token, OnToken sees each
// token as it comes and can end the decode, and a failed decode leaves no
// logits file.
func TestRun(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	engine := func(eos int) (*runtime.Engine, *model.Model) {
		cfg := synth.Config(model.Llama, false)
		cfg.EOS = eos
		m, err := synth.Model(cfg, 7)
		require.NoError(t, err)
		e, err := runtime.New(m, runtime.Options{Threads: 1})
		require.NoError(t, err)
		return e, m
	}
	e, m := engine(-1)
	vocab := e.Config().VocabSize
	prompt := []int32{1, 5, 9}
	whole := filepath.Join(dir, "whole.bin")
	res, err := runtime.Run(ctx, e, runtime.RunOptions{Prompt: prompt, Tokens: 8, StopEOS: true, Logits: whole})
	require.NoError(t, err)
	require.Len(t, res.Generated, 8)
	require.False(t, res.StoppedAtEOS)
	raw, err := os.ReadFile(whole)
	require.NoError(t, err)
	require.Len(t, raw, 8*vocab*4)
	for i, tok := range res.Generated {
		row := make([]float32, vocab)
		for j := range row {
			row[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[(i*vocab+j)*4:]))
		}
		require.Equal(t, tok, runtime.Argmax(row), "row %d", i)
	}

	p, err := shard.PlanModel(m, shard.Options{Stages: 2, AR: []int{4, 1}, CL: []int{32}})
	require.NoError(t, err)
	staged := filepath.Join(dir, "staged.bin")
	sres, err := runtime.Run(ctx, e, runtime.RunOptions{Prompt: prompt, Tokens: 8, Plan: p, Logits: staged})
	require.NoError(t, err)
	require.Equal(t, res.Generated, sres.Generated)
	require.NotEmpty(t, sres.Calls)
	sraw, err := os.ReadFile(staged)
	require.NoError(t, err)
	require.Equal(t, raw, sraw)

	// The same weights with the third generated token as EOS.
	eos := res.Generated[2]
	stop := filepath.Join(dir, "stop.bin")
	eosEngine, _ := engine(int(eos))
	var seen []int32
	onToken := func(id int32) error { seen = append(seen, id); return nil }
	eres, err := runtime.Run(ctx, eosEngine, runtime.RunOptions{Prompt: prompt, Tokens: 8, StopEOS: true, Logits: stop, OnToken: onToken})
	require.NoError(t, err)
	first := slices.Index(res.Generated, eos)
	require.Equal(t, res.Generated[:first+1], eres.Generated)
	require.True(t, eres.StoppedAtEOS)
	require.Equal(t, eres.Generated, seen, "OnToken sees each generated token, the EOS too")
	st, err := os.Stat(stop)
	require.NoError(t, err)
	require.EqualValues(t, (first+1)*vocab*4, st.Size())

	// OnToken, also through a plan, sees each token as it is generated,
	// and its error ends the decode there: Run returns it and writes no
	// logits file.
	for _, plan := range []*shard.Plan{nil, p} {
		seen = nil
		_, err = runtime.Run(ctx, e, runtime.RunOptions{Prompt: prompt, Tokens: 8, Plan: plan, OnToken: onToken})
		require.NoError(t, err)
		require.Equal(t, res.Generated, seen)
		errStop := errors.New("stop")
		failed := filepath.Join(dir, "failed.bin")
		seen = nil
		_, err = runtime.Run(ctx, e, runtime.RunOptions{Prompt: prompt, Tokens: 8, Plan: plan, Logits: failed, OnToken: func(id int32) error {
			if seen = append(seen, id); len(seen) == 3 {
				return errStop
			}
			return nil
		}})
		require.ErrorIs(t, err, errStop)
		require.Equal(t, res.Generated[:3], seen)
		_, err = os.Stat(failed)
		require.True(t, os.IsNotExist(err), "a failed run left %s", failed)
	}

	bad := filepath.Join(dir, "bad.bin")
	_, err = runtime.Run(ctx, e, runtime.RunOptions{Prompt: []int32{int32(vocab)}, Tokens: 4, Logits: bad})
	require.Error(t, err)
	_, err = os.Stat(bad)
	require.True(t, os.IsNotExist(err), "a failed run left %s", bad)
}
