#!/bin/sh
# Reproduces this directory: the 700M synthetic llama in Q1_0, Q8_0 and
# F16, timed by qnnprep and by llama.cpp's llama-bench side by side (for
# each thread count, llama-bench runs right after qnnprep). Run it from
# the repository root on an otherwise idle machine; it takes a few minutes.
#
#   sh bench/testdata/700m-avx512/run.sh [OUTDIR]
#
# QNNPREP_PEERS_DIR must point at the peers' node_modules (llama-bench is
# found beside it, or set QNNPREP_LLAMA_BENCH); QNNPREP_BENCH_CACHE is
# where the models are written once (default $TMPDIR/qnnprep-bench).
set -eu
root=$(pwd)
out=$(cd "${1:-bench/testdata/700m-avx512}" && pwd)
models=${QNNPREP_BENCH_CACHE:-${TMPDIR:-/tmp}/qnnprep-bench}
mkdir -p "$models"
QNNPREP_BENCH_700M=1 QNNPREP_BENCH_CACHE="$models" go test -count=1 -timeout 60m -run 'TestWrite700M$' ./bench
go build -o "$models/qnnprep" ./cmd/qnnprep
cd "$models"
uptime
./qnnprep bench llama700m-Q1_0.gguf llama700m-Q8_0.gguf llama700m-F16.gguf \
	-p 64 -n 32 -r 3 -t 1,2 --llama --llama-peer llama-bench -o json > "$out/results.json"
uptime
# The plot this script wrote before (committed, so no .qnnprep-outputs
# lists it): qnnprep replaces only files it recorded writing.
rm -f "$out/bench-700m-avx512.png"
./qnnprep bench report "$out/results.json" -o table --plot "$out/bench-700m-avx512.png" > "$out/table.md"
git -C "$root" rev-parse --short HEAD
