#!/bin/sh
# The "AVX-512 masked" comparison: the 700M synthetic llama in Q1_0, Q8_0
# and F16, timed by qnnprep and by llama.cpp's llama-bench side by side
# (for each thread count llama-bench runs right after qnnprep), with both
# engines held to AVX2 on this AVX-512 machine: qnnprep through
# GODEBUG=cpu.avx512f=off (golang.org/x/sys/cpu then reports no AVX-512;
# the report says kernels "avx2" and cpu_mask "cpu.avx512f=off"), llama.cpp
# through --llama-cpu haswell (llama-bench is offered only ggml's AVX2
# CPU backend; the rows say "CPU haswell"). The CPU, caches and memory are
# still this machine's: this is not an AVX2-only CPU.
#
# Run it from the repository root on an otherwise idle machine; with the
# defaults it takes about as long as ../700m-avx512/run.sh (a few minutes
# idle; the AVX2 kernels are slower, so somewhat longer).
#
#   sh bench/testdata/700m-avx512-masked/run.sh [OUTDIR]
#
# QNNPREP_PEERS_DIR must point at the peers' node_modules (llama-bench is
# found beside it, or set QNNPREP_LLAMA_BENCH). QNNPREP_BENCH_CACHE is
# where the models are (written once when missing; default
# $TMPDIR/qnnprep-bench; /work/benchplot-models holds them). To try the
# script quickly, QNNPREP_BENCH_MODELS names other model files and
# QNNPREP_BENCH_ARGS other bench sizes (default "-p 64 -n 32 -r 3 -t 1,2").
set -eu
root=$(pwd)
out=$(cd "${1:-bench/testdata/700m-avx512-masked}" && pwd)
args=${QNNPREP_BENCH_ARGS:--p 64 -n 32 -r 3 -t 1,2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/qnnprep" ./cmd/qnnprep
. "$root/bench/testdata/700m-models.sh"
if [ -n "${QNNPREP_BENCH_MODELS:-}" ]; then
	models=$QNNPREP_BENCH_MODELS
else
	models=$(models700m)
fi
uptime
# shellcheck disable=SC2086 # $models and $args are lists
GODEBUG=cpu.avx512f=off "$tmp/qnnprep" bench $models $args \
	--llama --llama-peer llama-bench --llama-cpu haswell -o json >"$out/results.json"
uptime
# The plot this script wrote before (committed, so no .qnnprep-outputs
# lists it): qnnprep replaces only files it recorded writing.
rm -f "$out/bench-700m-avx512-masked.png"
"$tmp/qnnprep" bench report "$out/results.json" -o table --plot "$out/bench-700m-avx512-masked.png" >"$out/table.md"
# The report must say what was compared.
for want in '"kernels": "avx2"' '"cpu_mask": "cpu.avx512f=off"' '"backend": "CPU haswell"'; do
	if ! grep -q "$want" "$out/results.json"; then
		echo "run.sh: $out/results.json lacks $want" >&2
		exit 1
	fi
done
grep -m1 '"cpu":' "$out/results.json"
git -C "$root" rev-parse --short HEAD
