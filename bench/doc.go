// Package bench measures qnnprep's runtime and conversion speed on this
// machine, with llama.cpp beside it, and checks that every fast setting
// still computes the model.
//
// Run times prompt processing (pp: a prompt of Options.Prompt tokens in
// one Forward) and generation (tg: Options.Gen tokens, one Forward each)
// after the context has been filled to each depth, as llama-bench does,
// over repetitions that follow one untimed warm-up; it reports the mean
// and sample standard deviation of tokens/s with the machine's load
// average. Each timed run's output is compared with an untimed reference
// run on a separate engine (one thread, another batch size): the runtime
// promises bit-identical results whatever the thread count and batching,
// so any difference is a wrong kernel or setting and is shown in the
// sanity column rather than hidden behind a good number. Fault injects
// such an error on purpose. With a draft model (or the target's first
// layers as an early-exit draft) Run also measures speculative decoding
// against plain greedy decoding on the same engine, and with
// Options.Llama it times llama.cpp on the same file, tokens and depths.
//
// Convert measures quantize.Run: source and output GB/s end to end, peak
// RSS, and the read, quantize and write stages isolated as described
// there.
//
// Suite (schema.json, embedded as Schema) is the JSON form of both, and
// WriteTable, WriteCSV and WritePlot (SVG or PNG, gonum/plot) the others.
// The qnnprep bench commands are RunAll (Run over several models),
// ConvertAll (Convert over sources and recipes) and ReadSuites (merging
// saved results), each printed by Suite.Write; Suite.Insane lists the
// reports whose sanity check failed.
package bench

import _ "embed"

// Schema is the JSON Schema (draft 2020-12) of a Suite.
//
//go:embed schema.json
var Schema []byte
