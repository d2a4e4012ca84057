package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/qnnprep/qnnprep/golden"
	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/pipeline"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/shard"
)

var verifyCmd = &command{
	Name:    "verify",
	Usage:   "qnnprep verify ARTIFACT --golden FILE [--plan plan.json [--simulate-encodings DIR]] [--draft MODEL | --eagle3 HEAD.gguf] [-k K] [--min-match F] [--min-top1 F] [--min-cosine F] [--fail-on-degeneration=false] [--source-fingerprint SHA] [--kv-f16] [--json] [--report FILE] [--ctx N] [-t THREADS]",
	Summary: "decode an artifact against a golden file: exact match, first divergence, top-1, cosine, degeneration",
	Run:     runVerify,
}

func runVerify(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	goldenPath := fs.String("golden", "", "golden file recorded from the artifact's source model (qnnprep golden record)")
	planPath := fs.String("plan", "", "also decode through this shard plan's stages")
	simEnc := fs.String("simulate-encodings", "", "with --plan: also decode the golden's prompts through the plan with the encodings export wrote into DIR simulated (activations, KV, states and logits fake-quantized as declared) and report top-1, logit cosine and first divergence against the float decode; fails below the thresholds in README's Verdicts")
	draftPath := fs.String("draft", "", "also decode speculatively with this draft model (must equal the whole-model output)")
	eaglePath := fs.String("eagle3", "", "also decode speculatively with this EAGLE-3 head (GGUF or HF directory)")
	k := fs.IntP("k", "k", 4, "draft tokens per window with --draft or --eagle3")
	thresholds := addThresholdFlags(fs, "")
	sourceFP := fs.String("source-fingerprint", "", "accept the golden for an ARTIFACT made elsewhere (llama.cpp) from the golden's source: its fingerprint, as the refusal prints it (the report shows the override)")
	kvF16 := fs.Bool("kv-f16", false, "round attention like llama.cpp's default F16 KV cache (as golden record --kv-f16)")
	asJSON := fs.Bool("json", false, "print the JSON report instead of the table")
	reportPath := fs.String("report", "", "also write the JSON report to FILE")
	ctxLen := fs.Int("ctx", 0, "context length (default: the model's)")
	threads := fs.IntP("threads", "t", 2, "matmul threads (the output does not depend on it)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("want one ARTIFACT (a qmodel or any model qnnprep opens)")
	}
	if *goldenPath == "" {
		return usageError("--golden is required")
	}
	if *draftPath != "" && *eaglePath != "" {
		return usageError("give at most one of --draft and --eagle3")
	}
	if *k < 1 {
		return usageError("-k %d: want at least 1", *k)
	}
	if *simEnc != "" && *planPath == "" {
		return usageError("--simulate-encodings needs --plan (the plan the encodings were exported for)")
	}
	if *simEnc != "" && *kvF16 {
		return usageError("--simulate-encodings simulates the device's encodings, not llama.cpp's F16 cache: drop --kv-f16")
	}
	overrides, err := thresholds()
	if err != nil {
		return err
	}
	if err := checkPaths(ins(modelInput(fs.Arg(0)), modelInput(*draftPath), []string{*goldenPath, *planPath, *eaglePath, *simEnc}), []string{*reportPath}, nil); err != nil {
		return err
	}
	g, err := golden.Read(*goldenPath)
	if err != nil {
		return err
	}
	path := fs.Arg(0)
	m, err := model.Open(path)
	if err != nil {
		return err
	}
	defer m.Close()
	acc, err := g.Accept(m, *sourceFP)
	if err != nil {
		return fmt.Errorf("%s against %s: %w", path, *goldenPath, err)
	}
	e, err := runtime.New(m, runtime.Options{Threads: *threads, Context: *ctxLen, KVF16: *kvF16})
	if err != nil {
		return err
	}
	if err := g.CheckContext(e.ContextLength()); err != nil {
		return err
	}
	crit := g.DefaultCriteria(m, acc).With(overrides)
	var warnings []string
	if w := golden.KVWarning(g, *kvF16); w != "" {
		warnings = append(warnings, w)
		fmt.Fprintf(os.Stderr, "qnnprep verify: warning: %s\n", w)
	}
	var plan *shard.Plan
	decoders := []struct {
		name string
		d    golden.Decoder
	}{{"whole", golden.EngineDecoder(e)}}
	if *planPath != "" {
		p, err := shard.ReadPlan(*planPath)
		if err != nil {
			return err
		}
		// NewStaged refuses a plan made for another model, naming what differs.
		st, err := runtime.NewStaged(e, p)
		if err != nil {
			return fmt.Errorf("%s: %w", *planPath, err)
		}
		decoders = append(decoders, struct {
			name string
			d    golden.Decoder
		}{"plan " + *planPath, st})
		plan = p
	}
	if *draftPath != "" || *eaglePath != "" {
		ds, err := runtime.OpenDrafts(e, m, runtime.DraftSource{Model: *draftPath, Eagle3: *eaglePath},
			runtime.Options{Threads: *threads, Context: *ctxLen, KVF16: *kvF16})
		if err != nil {
			return err
		}
		defer ds.Close()
		decoders = append(decoders, struct {
			name string
			d    golden.Decoder
		}{fmt.Sprintf("speculative K=%d, %s", *k, ds.Name), golden.SpeculativeDecoder(e, ds.New, *k)})
		if plan != nil && *draftPath != "" {
			// And through the plan (EAGLE-3 needs hidden states the
			// stage graphs do not expose).
			st, err := runtime.NewStaged(e, plan)
			if err != nil {
				return err
			}
			decoders = append(decoders, struct {
				name string
				d    golden.Decoder
			}{fmt.Sprintf("plan %s, speculative K=%d, %s", *planPath, *k, ds.Name), golden.SpeculativeThrough(st, st, ds.New, *k)})
		}
	}
	var reports []*golden.Report
	pass := true
	for i, dc := range decoders {
		r, err := golden.Verify(ctx, dc.d, g, crit)
		if err != nil {
			return fmt.Errorf("%s (%s): %w", path, dc.name, err)
		}
		r.Golden, r.Artifact, r.Decoder = *goldenPath, path, dc.name
		r.Source, r.Warnings = acc, warnings
		if i > 0 {
			// Staged and speculative decoding must give the whole model's tokens.
			r.CompareOutputs(reports[0])
		}
		reports = append(reports, r)
		pass = pass && r.Pass
	}
	if *simEnc != "" {
		encs, err := pipeline.ReadGraphEncodings(*simEnc, plan)
		if err != nil {
			return err
		}
		r, err := pipeline.SimulateEncodings(ctx, m, plan, encs, pipeline.SimOptions{Prompts: g.Prompts, Tokens: g.Settings.Steps, Threads: *threads})
		if err != nil {
			return fmt.Errorf("%s (--simulate-encodings %s): %w", path, *simEnc, err)
		}
		r.Golden, r.Artifact = "its float decode", path
		r.Decoder = "plan " + *planPath + ", " + r.Decoder
		reports = append(reports, r)
		pass = pass && r.Pass
	}
	var js []byte
	if *asJSON || *reportPath != "" {
		var v any = reports[0]
		if len(reports) > 1 {
			v = reports
		}
		if js, err = json.MarshalIndent(v, "", "  "); err != nil {
			return err
		}
		js = append(js, '\n')
	}
	if *reportPath != "" {
		if err := atomicfile.WriteFile(*reportPath, js); err != nil {
			return err
		}
	}
	if *asJSON {
		os.Stdout.Write(js)
	} else {
		for i, r := range reports {
			if i > 0 {
				fmt.Println()
			}
			fmt.Printf("%s (%s) against %s\n\n", path, r.Decoder, r.Golden)
			if err := r.Table(os.Stdout); err != nil {
				return err
			}
		}
	}
	if !pass {
		return exitError{1}
	}
	return nil
}
