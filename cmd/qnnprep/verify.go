package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/pipeline"
	"github.com/qnnprep/qnnprep/runtime"
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
	path := fs.Arg(0)
	reports, err := pipeline.VerifyArtifact(ctx, pipeline.VerifyOptions{
		Artifact: path, Golden: *goldenPath, SourceFingerprint: *sourceFP, Thresholds: overrides,
		Engine: runtime.Options{Threads: *threads, Context: *ctxLen, KVF16: *kvF16},
		Plan:   *planPath, SimulateEncodings: *simEnc, Draft: *draftPath, Eagle3: *eaglePath, K: *k,
		Warn: func(w string) { fmt.Fprintf(os.Stderr, "qnnprep verify: warning: %s\n", w) },
	})
	if err != nil {
		return err
	}
	pass := true
	for _, r := range reports {
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
