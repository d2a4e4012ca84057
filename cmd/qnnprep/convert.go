package main

import (
	"context"
	"fmt"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/tokenizer"
)

var convertCmd = &command{
	Name:    "convert",
	Usage:   "qnnprep convert --to gguf IN OUT [--vocab FILE] [--target MODEL]",
	Summary: "convert an HF checkpoint (or an EAGLE-3 draft head, to llama.cpp's eagle3 layout) to GGUF losslessly (F32/F16/BF16 kept), one tensor at a time",
	Run:     runConvert,
}

func runConvert(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	to := fs.String("to", "gguf", "output format (gguf)")
	vocab := fs.String("vocab", "", "vocabulary to embed when IN has no tokenizer.json: a GGUF, tokenizer.json or llama2.c tokenizer.bin")
	target := fs.String("target", "", "EAGLE-3 heads: the target model (GGUF or HF directory), for the default feature layers, the target hidden size, d2t's range and the tokenizer")
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
	var targetIn []string
	if *target != "" {
		targetIn = modelInput(*target)
	}
	if err := checkPaths(ins(modelInput(fs.Arg(0)), targetIn, []string{*vocab}), []string{fs.Arg(1)}, nil); err != nil {
		return err
	}
	if runtime.IsEagle3HF(fs.Arg(0)) {
		if *vocab != "" {
			return usageError("--vocab: an EAGLE-3 head takes its target's tokenizer (--target)")
		}
		return convertEagle3(fs.Arg(0), fs.Arg(1), *target, *quiet)
	}
	if *target != "" {
		return usageError("--target is for EAGLE-3 heads; %s is not one", fs.Arg(0))
	}
	m, err := model.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer m.Close()
	md, err := tokenizer.ModelMetadata(m)
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

// convertEagle3 writes the EAGLE-3 head at dir to out in llama.cpp's
// eagle3 GGUF layout, with what target (if given) says about the target.
func convertEagle3(dir, out, target string, quiet bool) error {
	var t runtime.Eagle3Target
	if target != "" {
		m, err := model.Open(target)
		if err != nil {
			return fmt.Errorf("--target: %w", err)
		}
		defer m.Close()
		md, err := tokenizer.ModelMetadata(m)
		if err != nil {
			return fmt.Errorf("--target %s: %w", target, err)
		}
		t = runtime.Eagle3Target{Layers: m.Config.Layers, Hidden: m.Config.Hidden, Vocab: m.Config.VocabSize, Metadata: md}
	}
	cfg, err := runtime.ConvertEagle3HF(dir, out, t)
	if err != nil {
		return err
	}
	if !quiet {
		fmt.Printf("%s → %s: EAGLE-3 head (eagle3), hidden %d, draft vocabulary %d, target layers %v, target hidden %d\n",
			dir, out, cfg.Hidden, cfg.DraftVocab, cfg.ExtractLayers, cfg.TargetHidden)
	}
	return nil
}
