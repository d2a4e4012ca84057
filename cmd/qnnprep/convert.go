package main

import (
	"context"
	"fmt"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize"
)

var convertCmd = &command{
	Name:    "convert",
	Usage:   "qnnprep convert --to gguf IN OUT [--vocab FILE]",
	Summary: "convert an HF checkpoint to GGUF losslessly (F32/F16/BF16 kept), one tensor at a time",
	Run:     runConvert,
}

func runConvert(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	to := fs.String("to", "gguf", "output format (gguf)")
	vocab := fs.String("vocab", "", "vocabulary to embed when IN has no tokenizer.json: a GGUF, tokenizer.json or llama2.c tokenizer.bin")
	quiet := fs.BoolP("quiet", "q", false, "no progress bar or summary")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *to != "gguf" {
		return usageError("--to %q: only gguf is supported", *to)
	}
	if fs.NArg() != 2 {
		return usageError("want IN and OUT")
	}
	if err := checkPaths(ins(modelInput(fs.Arg(0)), []string{*vocab}), []string{fs.Arg(1)}, nil); err != nil {
		return err
	}
	m, err := model.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer m.Close()
	md, err := tokenizerMetadata(m)
	if err != nil {
		return err
	}
	if *vocab != "" {
		v, err := loadVocab(*vocab, m.Config.VocabSize)
		if err != nil {
			return fmt.Errorf("--vocab %s: %w", *vocab, err)
		}
		md = v.GGUFMetadata()
		if err := m.Config.CheckVocab(md); err != nil {
			return fmt.Errorf("--vocab %s: %w", *vocab, err)
		}
	}
	bar := newProgress("convert", *quiet)
	rep, err := quantize.Run(ctx, m, fs.Arg(1), quantize.Options{Recipe: quantize.Recipes["keep"], Metadata: md, Progress: bar.set})
	bar.finish()
	if err != nil {
		return err
	}
	if !*quiet {
		fmt.Printf("%s → %s: %d tensors, %d weights, %d bytes in %.2fs\n", rep.Source, rep.Output, len(rep.Tensors), rep.Weights, rep.OutputBytes, rep.Seconds)
	}
	return nil
}
